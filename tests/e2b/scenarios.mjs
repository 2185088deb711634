// tests/e2b/scenarios.mjs: the scenarios of e2b-compat.md §12 that both SDK generations run
// (rows 1, 2, 5, 6, 8, 12, 13, 16, 17: row 22 reruns them under e2b 2.45.0), as functions of a
// context {sbx} holding a live sandbox. Each asserts on the SDK's return values and error
// classes only. commands.test.mjs, files.test.mjs and control.test.mjs run them under the
// current SDK, legacy.test.mjs under the legacy one.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Sandbox, e2b, rejects, sleep, text } from './lib.mjs';

export const RUN = process.env.E2BT_RUN_ID || 'e2bt';

// #1: create with template base, metadata and envs; kill → true; kill again → false
export async function createKill() {
	const sbx = await Sandbox.create('base', { metadata: { k: 'v', run: RUN }, envs: { A: '1' } });
	assert.match(sbx.sandboxId, /^[a-z0-9]+$/);
	assert.equal(await sbx.kill(), true);
	assert.equal(await Sandbox.kill(sbx.sandboxId), false);
}

// #2: stdout, stderr and the sandbox's env (envs at create)
export async function runEcho({ sbx }) {
	const r = await sbx.commands.run('echo hello; echo err >&2; echo $A; exit 0');
	assert.equal(r.exitCode, 0);
	assert.equal(r.stdout, 'hello\n1\n');
	assert.equal(r.stderr, 'err\n');
}

// #3: a non-zero exit is CommandExitError carrying the code
export async function runExit3({ sbx }) {
	await rejects(sbx.commands.run('exit 3'), e2b.CommandExitError, (e) => {
		assert.equal(e.exitCode, 3);
	});
}

// #5: a background command returns at its start event, its wait() at its end
export async function background({ sbx }) {
	const t0 = Date.now();
	const h = await sbx.commands.run('sleep 5', { background: true });
	const started = Date.now() - t0;
	assert.ok(started < 1000, `background run returned after ${started} ms (want < 1000)`);
	assert.ok(Number.isInteger(h.pid) && h.pid > 0, `pid ${h.pid}`);
	const r = await h.wait();
	const took = Date.now() - t0;
	assert.equal(r.exitCode, 0);
	assert.ok(took >= 4500 && took < 9000, `wait() after ${took} ms (want about 5000)`);
}

// #6 and #7: stdin to a background cat, seen in list() while it runs
export async function stdinCat({ sbx }) {
	const h = await sbx.commands.run('cat', { background: true, stdin: true });
	const p = (await sbx.commands.list()).find((x) => x.pid === h.pid);
	assert.ok(p, `pid ${h.pid} is in commands.list()`);
	assert.equal(p.cmd, '/bin/bash');
	assert.deepEqual(p.args, ['-l', '-c', 'cat']);
	await sbx.commands.sendStdin(h.pid, 'abc\n');
	await sbx.commands.closeStdin(h.pid);
	const r = await h.wait();
	assert.equal(r.exitCode, 0);
	assert.equal(r.stdout, 'abc\n');
}

// #8: kill a running command (true), an unknown pid (false); its wait() is exit -1
export async function killCommand({ sbx }) {
	const h = await sbx.commands.run('sleep 30', { background: true });
	assert.equal(await sbx.commands.kill(h.pid), true);
	assert.equal(await sbx.commands.kill(999999), false);
	await rejects(h.wait(), e2b.CommandExitError, (e) => assert.equal(e.exitCode, -1));
}

// #12: write and read text, 1 MiB of random bytes with NULs, several files at once, relative
// paths under /home/user
export async function filesWriteRead({ sbx }) {
	const w = await sbx.files.write('/home/user/a.txt', 'hi');
	assert.equal(w.path, '/home/user/a.txt');
	assert.equal(w.name, 'a.txt');
	assert.equal(await sbx.files.read('/home/user/a.txt'), 'hi');
	const rnd = randomBytes(1 << 20);
	rnd[0] = 0;
	rnd[rnd.length - 1] = 0;
	const copy = new Uint8Array(rnd).buffer;
	await sbx.files.write('/home/user/r.bin', copy);
	const back = await sbx.files.read('/home/user/r.bin', { format: 'bytes' });
	assert.ok(Buffer.from(back).equals(rnd), `1 MiB read back equal (${back.length} bytes)`);
	const infos = await sbx.files.write([{ path: 'b.txt', data: 'B' },
		{ path: '/home/user/c.txt', data: 'C' }]);
	assert.equal(infos.length, 2);
	assert.ok(['b.txt', '/home/user/b.txt'].includes(infos[0].path), `path ${infos[0].path}`);
	assert.equal(infos[1].path, '/home/user/c.txt');
	assert.equal(await sbx.files.read('/home/user/b.txt'), 'B');
	assert.equal(await sbx.files.read('c.txt'), 'C');
}

// #13: exists, makeDir, list with depth, remove, a missing file
export async function filesDirs({ sbx }) {
	const { FileType } = e2b;
	await sbx.files.write('/home/user/a.txt', 'hi');
	assert.equal(await sbx.files.exists('/home/user/a.txt'), true);
	assert.equal(await sbx.files.exists('/home/user/nope'), false);
	assert.equal(await sbx.files.makeDir('/home/user/d'), true);
	assert.equal(await sbx.files.makeDir('/home/user/d'), false);
	await sbx.files.write('/home/user/d/e.txt', 'EE');
	const one = await sbx.files.list('/home/user');
	const a = one.find((e) => e.name === 'a.txt');
	const d = one.find((e) => e.name === 'd');
	assert.ok(a && d, `a.txt and d listed: ${one.map((e) => e.name)}`);
	assert.equal(a.type, FileType.FILE);
	assert.equal(d.type, FileType.DIR);
	assert.equal(a.path, '/home/user/a.txt');
	assert.equal(typeof a.size, 'number');
	assert.equal(a.size, 2);
	assert.ok(a.modifiedTime instanceof Date && !Number.isNaN(a.modifiedTime.getTime()),
		`modifiedTime ${a.modifiedTime}`);
	assert.ok(!one.some((e) => e.path === '/home/user/d/e.txt'), 'depth 1 stays at one level');
	const two = await sbx.files.list('/home/user', { depth: 2 });
	const e = two.find((x) => x.path === '/home/user/d/e.txt');
	assert.ok(e, `depth 2 lists d/e.txt: ${two.map((x) => x.path)}`);
	assert.equal(e.size, 2);
	await sbx.files.remove('/home/user/d');
	assert.equal(await sbx.files.exists('/home/user/d'), false);
	await rejects(sbx.files.read('/nope'), e2b.FileNotFoundError);
}

// #16: running, info, setTimeout, connect, list by metadata and paged
export async function infoTimeoutList({ sbx, other }) {
	assert.equal(await sbx.isRunning(), true);
	const info = await sbx.getInfo();
	assert.equal(info.sandboxId, sbx.sandboxId);
	assert.equal(info.state, 'running');
	assert.deepEqual(info.metadata, { k: 'v', run: RUN });
	const ttl = info.endAt.getTime() - info.startedAt.getTime();
	assert.ok(Math.abs(ttl - 300_000) <= 5000, `endAt - startedAt = ${ttl} ms (want 300 s)`);
	await sbx.setTimeout(60_000);
	const after = await sbx.getInfo();
	const left = after.endAt.getTime() - Date.now();
	assert.ok(left > 50_000 && left <= 62_000, `endAt ${left} ms ahead after setTimeout(60 s)`);
	const again = await Sandbox.connect(sbx.sandboxId);
	assert.equal(again.sandboxId, sbx.sandboxId);
	assert.equal((await again.commands.run('echo ok')).stdout, 'ok\n');
	const listed = await Sandbox.list({ query: { metadata: { k: 'v' } } }).nextItems();
	assert.ok(listed.some((s) => s.sandboxId === sbx.sandboxId), 'list by metadata names it');
	assert.ok(listed.every((s) => s.metadata?.k === 'v'), 'list by metadata names only k=v');
	// both carry run=RUN (other files' sandboxes may too): at least two match
	assert.ok(other.sandboxId !== sbx.sandboxId);
	const page = Sandbox.list({ limit: 1, query: { metadata: { run: RUN } } });
	const first = await page.nextItems();
	assert.equal(first.length, 1);
	assert.equal(first[0].metadata?.run, RUN);
	assert.equal(page.hasNext, true, 'limit 1 with 2 sandboxes: hasNext');
	const second = await page.nextItems();
	assert.ok(second.length >= 1 && second[0].sandboxId !== first[0].sandboxId, 'the next page');
}

// #17: a killed sandbox, seen from every side
export async function afterKill({ sbx }) {
	assert.equal(await sbx.kill(), true);
	assert.equal(await sbx.isRunning(), false);
	await rejects(sbx.commands.run('true'), e2b.SandboxNotFoundError);
	await rejects(sbx.files.exists('/home/user'), e2b.TimeoutError);
	await rejects(sbx.getInfo(), e2b.SandboxNotFoundError);
	await rejects(Sandbox.connect(sbx.sandboxId), e2b.SandboxNotFoundError);
}

export { sleep, text };

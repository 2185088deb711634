// tests/e2b/commands.test.mjs: commands through the real SDK (e2b-compat.md §12 rows 2-10 and
// 15, and the InvalidArgumentError of a missing cwd), all in one sandbox.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Sandbox, e2b, rejects, waitFor } from './lib.mjs';
import * as s from './scenarios.mjs';

const ctx = {};
before(async () => {
	ctx.sbx = await Sandbox.create({ metadata: { run: s.RUN }, envs: { A: '1' } });
}, { timeout: 60_000 });
after(async () => ctx.sbx?.kill().catch(() => {}));

const T = { timeout: 30_000 };
test('#2 run: stdout, stderr, the sandbox env', T, () => s.runEcho(ctx));
test('#3 run: exit 3 is CommandExitError', T, () => s.runExit3(ctx));

test('#4 run: onStdout is called per line as it comes', T, async () => {
	const ts = [], chunks = [];
	const r = await ctx.sbx.commands.run('for i in 1 2 3; do echo $i; sleep 0.5; done', {
		onStdout: (d) => { ts.push(Date.now()); chunks.push(d); } });
	assert.equal(r.exitCode, 0);
	assert.equal(chunks.join(''), '1\n2\n3\n');
	assert.equal(ts.length, 3, `callbacks: ${JSON.stringify(chunks)}`);
	assert.ok(ts[2] - ts[0] >= 800, `first to last callback ${ts[2] - ts[0]} ms (want >= 800)`);
});

test('#5 run background: returns at start, wait() at the end', T, () => s.background(ctx));
test('#6 #7 stdin: sendStdin, closeStdin, list() names the command', T, () => s.stdinCat(ctx));
test('#8 kill: true, unknown pid false, wait() exit -1', T, () => s.killCommand(ctx));

test('#9 connect: re-attach sees later output; an unknown pid is NotFoundError', T, async () => {
	const h = await ctx.sbx.commands.run('sleep 1; echo late', { background: true });
	const out = [];
	const c = await ctx.sbx.commands.connect(h.pid, { onStdout: (d) => out.push(d) });
	const r = await c.wait();
	assert.equal(r.exitCode, 0);
	assert.equal(out.join(''), 'late\n');
	assert.equal((await h.wait()).stdout, 'late\n');
	await rejects(ctx.sbx.commands.connect(12345), e2b.NotFoundError);
});

test('#10 timeoutMs: wait() is TimeoutError and the server killed the process', T, async () => {
	const h = await ctx.sbx.commands.run('sleep 10', { timeoutMs: 1000, background: true });
	await rejects(h.wait(), e2b.TimeoutError);
	await waitFor(async () => !(await ctx.sbx.commands.list()).some((p) => p.pid === h.pid),
		2000, `pid ${h.pid} gone from list()`);
});

test('#15 user root is refused with the reason, never run as another uid', T, async () => {
	await rejects(ctx.sbx.commands.run('id -u', { user: 'root' }), e2b.SandboxError, (e) => {
		assert.ok(!(e instanceof e2b.CommandExitError), 'not a command result');
		assert.match(e.message, /root/);
		assert.match(e.message, /10001|no capabilities/);
	});
	await rejects(ctx.sbx.files.read('/etc/passwd', { user: 'root' }), e2b.SandboxError,
		(e) => assert.match(e.message, /root/));
	assert.equal((await ctx.sbx.commands.run('id -u', { user: 'user' })).stdout, '10001\n');
	assert.equal((await ctx.sbx.commands.run('id -un')).stdout, 'user\n');
});

test('a cwd that does not exist is InvalidArgumentError', T, async () => {
	await rejects(ctx.sbx.commands.run('pwd', { cwd: '/home/user/no-such-dir' }),
		e2b.InvalidArgumentError);
});

test('home: HOME, cd ~, bash -l -c pwd and the default cwd are /home/user', T, async () => {
	const r = await ctx.sbx.commands.run('pwd; echo $HOME; cd ~ && pwd; bash -l -c pwd');
	assert.equal(r.stdout, '/home/user\n/home/user\n/home/user\n/home/user\n');
	assert.equal((await ctx.sbx.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n');
});

// tests/e2b/pty.test.mjs: a terminal through the SDK's sandbox.pty API: create with a size,
// sendInput, resize (the shell sees the new size), exit and kill.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Sandbox, e2b, rejects, waitFor } from './lib.mjs';
import * as s from './scenarios.mjs';

const ctx = {};
before(async () => {
	ctx.sbx = await Sandbox.create({ metadata: { run: s.RUN } });
}, { timeout: 60_000 });
after(async () => ctx.sbx?.kill().catch(() => {}));

const enc = (t) => new TextEncoder().encode(t);

test('pty: a sized terminal, input, resize, exit code', { timeout: 30_000 }, async () => {
	let out = '';
	const h = await ctx.sbx.pty.create({ cols: 80, rows: 24,
		onData: (d) => { out += Buffer.from(d).toString(); } });
	assert.ok(h.pid > 0);
	await ctx.sbx.pty.sendInput(h.pid, enc('stty size; tty; echo "T=$TERM U=$(id -u)"\n'));
	await waitFor(() => /24 80/.test(out) && /T=xterm-256color U=10001/.test(out), 10_000,
		`size 24 80 and the env in ${JSON.stringify(out.slice(-300))}`);
	assert.match(out, /\/dev\/pts\/\d+/);
	await ctx.sbx.pty.resize(h.pid, { cols: 100, rows: 30 });
	await ctx.sbx.pty.sendInput(h.pid, enc('stty size\n'));
	await waitFor(() => /30 100/.test(out), 10_000, `size 30 100 in ${JSON.stringify(out.slice(-200))}`);
	await ctx.sbx.pty.sendInput(h.pid, enc('exit 7\n'));
	await rejects(h.wait(), e2b.CommandExitError, (e) => assert.equal(e.exitCode, 7));
});

test('pty: kill → true, the handle ends killed; an unknown pid → false', { timeout: 30_000 },
	async () => {
		const h = await ctx.sbx.pty.create({ cols: 40, rows: 10, onData: () => {} });
		assert.equal(await ctx.sbx.pty.kill(h.pid), true);
		await rejects(h.wait(), e2b.CommandExitError, (e) => assert.equal(e.exitCode, -1));
		assert.equal(await ctx.sbx.pty.kill(999999), false);
	});

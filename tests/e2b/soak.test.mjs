// tests/e2b/soak.test.mjs: `make soak` (tests/e2b/run soak): e2b-compat.md §12 row 11, a silent
// command longer than the SDK's default 60 s lifetime with timeoutMs 0 (no Connect-Timeout-Ms:
// no limit), kept alive by keepalive frames; beside it a 60 s default-timeout run is killed.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Sandbox, e2b, rejects } from './lib.mjs';
import * as s from './scenarios.mjs';

const ctx = {};
before(async () => {
	ctx.sbx = await Sandbox.create({ metadata: { run: s.RUN } });
}, { timeout: 60_000 });
after(async () => ctx.sbx?.kill().catch(() => {}));

test('#11 run(sleep 70, timeoutMs 0) exits 0 after 70 s', { timeout: 120_000 }, async () => {
	const t0 = Date.now();
	const bounded = ctx.sbx.commands.run('sleep 70', { background: true });
	const r = await ctx.sbx.commands.run('sleep 70', { timeoutMs: 0 });
	assert.equal(r.exitCode, 0);
	assert.ok(Date.now() - t0 >= 69_000);
	await rejects((await bounded).wait(), e2b.TimeoutError);
});

// tests/e2b/legacy.test.mjs: e2b-compat.md §12 row 22: rows 1, 2, 5, 6, 8, 12, 13, 16 and 17
// under e2b 2.45.0 (tests/e2b/run runs this file with E2BT_SDK_DIR at the legacy install): the
// legacy POST /sandboxes (secure, allow_internet_access, timeout always sent) and
// /sandboxes/{id}/connect, and the client-side key format check of that generation.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Sandbox, e2b, rejects, sdkVersion } from './lib.mjs';
import * as s from './scenarios.mjs';

const ctx = {};
const made = [];
before(async () => {
	assert.equal(sdkVersion, '2.45.0');
	ctx.sbx = await Sandbox.create({ metadata: { k: 'v', run: s.RUN }, envs: { A: '1' } });
	made.push(ctx.sbx);
}, { timeout: 60_000 });
after(async () => Promise.all(made.map((x) => x.kill().catch(() => {}))));

const T = { timeout: 60_000 };
test('2.45 #1 create, kill → true, kill again → false', T, () => s.createKill());
test('2.45 #2 run: stdout, stderr, the sandbox env', T, () => s.runEcho(ctx));
test('2.45 #5 run background', T, () => s.background(ctx));
test('2.45 #6 stdin', T, () => s.stdinCat(ctx));
test('2.45 #8 kill', T, () => s.killCommand(ctx));
test('2.45 #12 write and read', T, () => s.filesWriteRead(ctx));
test('2.45 #13 exists, makeDir, list, remove', T, () => s.filesDirs(ctx));
test('2.45 #16 info, timeout, connect, list', T, async () => {
	const other = await Sandbox.create({ metadata: { k: 'v', run: s.RUN } });
	made.push(other);
	await s.infoTimeoutList({ sbx: ctx.sbx, other });
});
test('2.45 #17 a killed sandbox', T, async () => {
	const sbx = await Sandbox.create({ metadata: { run: s.RUN } });
	made.push(sbx);
	await s.afterKill({ sbx });
});
test('2.45 a key not shaped e2b_<hex> fails in the SDK itself', T, async () => {
	const key = process.env.E2B_API_KEY;
	try {
		process.env.E2B_API_KEY = 'notvalid';
		await rejects(Sandbox.create(), e2b.AuthenticationError,
			(e) => assert.match(e.message, /format/));
	} finally {
		process.env.E2B_API_KEY = key;
	}
});

// tests/e2b/files.test.mjs: files through the real SDK (e2b-compat.md §12 rows 12-14), a full
// disk (NotEnoughSpaceError), a listing of a file (InvalidArgumentError), all in one sandbox.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Sandbox, e2b, rejects } from './lib.mjs';
import * as s from './scenarios.mjs';

const ctx = {};
before(async () => {
	ctx.sbx = await Sandbox.create({ metadata: { run: s.RUN } });
}, { timeout: 60_000 });
after(async () => ctx.sbx?.kill().catch(() => {}));

const T = { timeout: 30_000 };
test('#12 write and read: text, 1 MiB of bytes, several files, relative paths', T,
	() => s.filesWriteRead(ctx));
test('#13 exists, makeDir, list depth 1 and 2, remove, FileNotFoundError', T,
	() => s.filesDirs(ctx));

test('#14 a written file belongs to the workload uid 10001', T, async () => {
	await ctx.sbx.files.write('/home/user/owned.txt', 'x');
	const r = await ctx.sbx.commands.run('stat -c %u /home/user/owned.txt');
	assert.equal(r.stdout, '10001\n');
});

test('a file the command wrote is read back, and the other way round', T, async () => {
	await ctx.sbx.commands.run('printf made-by-cmd > /home/user/cmd.txt');
	assert.equal(await ctx.sbx.files.read('/home/user/cmd.txt'), 'made-by-cmd');
	await ctx.sbx.files.write('/home/user/sdk.txt', 'made-by-sdk');
	assert.equal((await ctx.sbx.commands.run('cat ~/sdk.txt')).stdout, 'made-by-sdk');
});

test('listing a file is InvalidArgumentError', T, async () => {
	await ctx.sbx.files.write('/home/user/plain.txt', 'p');
	await rejects(ctx.sbx.files.list('/home/user/plain.txt'), e2b.InvalidArgumentError);
});

test('a write past the disk budget is NotEnoughSpaceError', { timeout: 60_000 }, async () => {
	const mib = Number(process.env.E2BT_DISK_MIB || 32);
	const big = new Uint8Array((mib + 8) << 20).fill(7).buffer;
	await rejects(ctx.sbx.files.write('/home/user/big.bin', big), e2b.NotEnoughSpaceError);
	await ctx.sbx.files.remove('/home/user/big.bin');
	await ctx.sbx.files.write('/home/user/after.txt', 'room again');
	assert.equal(await ctx.sbx.files.read('/home/user/after.txt'), 'room again');
});

test('signed URLs: uploadUrl and downloadUrl carry no token; a changed signature is 401', T,
	async () => {
		const up = await ctx.sbx.uploadUrl('/home/user/signed.txt');
		assert.match(up, /signature=v1_/);
		const fd = new FormData();
		fd.append('file', new Blob(['signed upload']), 'signed.txt');
		const r = await fetch(up, { method: 'POST', body: fd });
		assert.equal(r.status, 200, await r.clone().text());
		const down = await ctx.sbx.downloadUrl('/home/user/signed.txt');
		assert.equal(await (await fetch(down)).text(), 'signed upload');
		assert.equal(await ctx.sbx.files.read('/home/user/signed.txt'), 'signed upload');
		const bad = down.replace(/signature=v1_(.)/, (m, ch) => `signature=v1_${ch === 'A' ? 'B' : 'A'}`);
		const refused = await fetch(bad);
		assert.equal(refused.status, 401);
		assert.equal((await refused.json()).code, 401);
	});

// tools/bench/e2b_bench.mjs: the real e2b SDK's side of bench_e2b (which starts agenticd, mints
// the key and measures the peers). The SDK reads only E2B_API_URL, E2B_SANDBOX_URL and
// E2B_API_KEY. Prints millisecond samples as JSON (tti and files: one object at the end):
//   node e2b_bench.mjs run       commands.run('true') in one sandbox (after 5 unmeasured) once
//                                for each line `go` on its stdin, each sample a line {"ms": T}
//                                (after a first {"ready": true}): bench_e2b runs its peers
//                                between them
//   node e2b_bench.mjs tti N     N times: Sandbox.create() to the first commands.run('true')'s
//                                result; the kill and (with E2BB_ADMIN_SOCK) the warm pool's
//                                refill happen between samples, off the clock
//   node e2b_bench.mjs files N   1 MiB of random bytes: files.write then files.read (bytes) N
//                                times, the bytes checked equal
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const dir = process.env.E2BB_SDK_DIR;
const pkg = JSON.parse(readFileSync(`${dir}/node_modules/e2b/package.json`, 'utf8'));
const { Sandbox } = await import(pathToFileURL(`${dir}/node_modules/e2b/${pkg.module}`).href);
const [mode, count] = [process.argv[2], Number(process.argv[3] || 11)];
const now = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function info() { // agenticd's GET /api/v1/info over its admin socket
	return new Promise((resolve, reject) => {
		http.get({ socketPath: process.env.E2BB_ADMIN_SOCK, path: '/api/v1/info' }, (res) => {
			let b = '';
			res.on('data', (c) => { b += c; });
			res.on('end', () => resolve(JSON.parse(b)));
		}).on('error', reject);
	});
}

// the warm pool full and claimable, every sandbox ready: nothing of the daemon's own runs meanwhile
async function settled() {
	const want = Number(process.env.E2BB_WARM || 0);
	if (!want) return;
	for (let i = 0; i < 1200; i++) {
		const d = await info();
		if (d.warm_sandboxes_ready >= want && d.sandboxes === d.sandboxes_ready) break;
		await sleep(50);
	}
	await sleep(300);
}

const out = {};
if (mode === 'run') {
	const sbx = await Sandbox.create();
	for (let i = 0; i < 5; i++) await sbx.commands.run('true');
	console.log(JSON.stringify({ ready: true }));
	for await (const line of createInterface({ input: process.stdin })) {
		if (line !== 'go') break;
		const t0 = now();
		await sbx.commands.run('true');
		console.log(JSON.stringify({ ms: now() - t0 }));
	}
	await sbx.kill();
	process.exit(0);
} else if (mode === 'tti') {
	out.tti = [];
	for (let i = -1; i < count; i++) {
		await settled();
		const t0 = now();
		const sbx = await Sandbox.create();
		await sbx.commands.run('true');
		const t = now() - t0;
		if (i >= 0) out.tti.push(t); // the first one warms the engine's and the SDK's caches
		await sbx.kill();
	}
} else if (mode === 'files') {
	const sbx = await Sandbox.create();
	const data = randomBytes(1 << 20);
	out.files = [];
	for (let i = -2; i < count; i++) {
		const t0 = now();
		await sbx.files.write('/home/user/bench.bin', new Uint8Array(data).buffer);
		const back = await sbx.files.read('/home/user/bench.bin', { format: 'bytes' });
		const t = now() - t0;
		if (!Buffer.from(back).equals(data)) throw new Error('the 1 MiB read back differs');
		if (i >= 0) out.files.push(t);
	}
	await sbx.kill();
} else {
	throw new Error(`mode ${mode}: run, tti or files`);
}
console.log(JSON.stringify(out));

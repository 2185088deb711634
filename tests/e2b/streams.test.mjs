// tests/e2b/streams.test.mjs: run alone (tests/e2b/run's second phase, so agenticd's descriptor
// count is this file's own): many streams at once (e2b-compat.md §12 row 21) and the wire
// itself with a raw HTTP client (row 23, and row 11's keepalive frames at a 1 s interval).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Sandbox, daemonFds, envelope, envelopes, raw, sleep, waitFor } from './lib.mjs';
import * as s from './scenarios.mjs';

const made = [];
async function create(opts = {}) {
	const sbx = await Sandbox.create({ ...opts, metadata: { run: s.RUN } });
	made.push(sbx);
	return sbx;
}
const ctx = {};
before(async () => { ctx.sbx = await create(); }, { timeout: 60_000 });
after(async () => Promise.all(made.map((x) => x.kill().catch(() => {}))));

const envd = (extra = {}) => ({ 'E2b-Sandbox-Id': ctx.sbx.sandboxId, 'E2b-Sandbox-Port': '49983',
	'X-Access-Token': ctx.sbx.envdAccessToken, 'Connect-Protocol-Version': '1', ...extra });

test('#21 50 background commands in one sandbox and 5 sandboxes at once; fds back to baseline',
	{ timeout: 120_000 }, async () => {
		const base = daemonFds();
		const hs = await Promise.all(Array.from({ length: 50 },
			() => ctx.sbx.commands.run('sleep 2', { background: true })));
		assert.equal(new Set(hs.map((h) => h.pid)).size, 50, 'fifty distinct pids');
		// the positive control: fifty open streams are fifty more descriptors of agenticd's
		const busy = daemonFds();
		assert.ok(busy >= base + 50, `${busy} fds with 50 streams open (baseline ${base})`);
		const five = await Promise.all(Array.from({ length: 5 }, () => create()));
		const outs = await Promise.all(five.map((x, i) => x.commands.run(`echo sb${i}`)));
		assert.deepEqual(outs.map((r) => r.stdout), [0, 1, 2, 3, 4].map((i) => `sb${i}\n`));
		const results = await Promise.all(hs.map((h) => h.wait()));
		assert.ok(results.every((r) => r.exitCode === 0), 'all fifty exit 0');
		await Promise.all(five.map((x) => x.kill()));
		// the SDK's idle keep-alive sockets stay as long as the listener's hint says
		// (Keep-Alive: timeout=30); the listener closes an idle one after 35 s
		await waitFor(() => daemonFds() <= base, 45_000,
			`agenticd's fd count back to ${base} (now ${daemonFds()})`);
	});

test('#23 a chunked JSON create is 201; the REST 404 is JSON with code 404', { timeout: 60_000 },
	async () => {
		const key = { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json',
			'Transfer-Encoding': 'chunked' };
		const r = await raw('POST', '/v2/sandboxes', { headers: key,
			body: JSON.stringify({ templateID: 'base', metadata: { run: s.RUN } }) });
		assert.equal(r.status, 201, r.body.toString());
		const sb = JSON.parse(r.body);
		assert.match(sb.sandboxID, /^[a-z0-9]+$/);
		assert.equal(sb.templateID, 'base');
		assert.equal(sb.envdVersion, '0.5.6');
		assert.ok(sb.envdAccessToken && sb.clientID, 'token and clientID');
		const del = await raw('DELETE', `/sandboxes/${sb.sandboxID}`, { headers: key });
		assert.equal(del.status, 204);
		const again = await raw('DELETE', `/sandboxes/${sb.sandboxID}`, { headers: key });
		assert.equal(again.status, 404);
		assert.equal(JSON.parse(again.body).code, 404);
	});

test('#23 a unary error is application/json with a string code', { timeout: 30_000 }, async () => {
	const r = await raw('POST', '/filesystem.Filesystem/Stat', {
		headers: envd({ 'Content-Type': 'application/json' }),
		body: JSON.stringify({ path: '/home/user/no-such-file' }) });
	assert.equal(r.status, 404);
	assert.match(r.headers['content-type'], /^application\/json/);
	assert.equal(JSON.parse(r.body).code, 'not_found');
	assert.equal(r.headers['connect-content-encoding'], undefined);
});

test('#23 a stream: start first, end last, then a 0x02 end-stream; no compression; keep-alive hint',
	{ timeout: 30_000 }, async () => {
		const r = await raw('POST', '/process.Process/Start', {
			headers: envd({ 'Content-Type': 'application/connect+json' }),
			body: envelope({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'echo hi'] } }),
			keepAlive: true });
		assert.equal(r.status, 200);
		assert.equal(r.headers['content-type'], 'application/connect+json');
		assert.equal(r.headers['connect-content-encoding'], undefined);
		assert.match(r.headers['keep-alive'] ?? '', /timeout=\d+/, 'Keep-Alive hint');
		const env = envelopes(r.body);
		assert.ok(env.length >= 3, JSON.stringify(env));
		assert.ok(env[0].json.event?.start?.pid > 0, 'start first');
		assert.ok(env.slice(0, -1).every((e) => e.flags === 0));
		const last = env.at(-1);
		assert.equal(last.flags, 0x02);
		assert.equal(last.json.error, undefined);
		assert.ok('end' in env.at(-2).json.event, 'end before end-stream');
		const out = env.filter((e) => e.json.event?.data?.stdout)
			.map((e) => Buffer.from(e.json.event.data.stdout, 'base64').toString()).join('');
		assert.equal(out, 'hi\n');
	});

test('#11 keepalive frames come about every Keepalive-Ping-Interval seconds of silence',
	{ timeout: 30_000 }, async () => {
		const t0 = Date.now();
		const r = await raw('POST', '/process.Process/Start', {
			headers: envd({ 'Content-Type': 'application/connect+json',
				'Keepalive-Ping-Interval': '1' }),
			body: envelope({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'sleep 3.5'] } }) });
		const took = Date.now() - t0;
		const kinds = envelopes(r.body).map((e) => e.flags === 2 ? 'eos'
			: Object.keys(e.json.event ?? {})[0]);
		const n = kinds.filter((k) => k === 'keepalive').length;
		assert.equal(kinds[0], 'start');
		assert.ok(n >= 2 && n <= 4, `${n} keepalives in ${took} ms: ${kinds}`);
		assert.deepEqual(kinds.slice(-2), ['end', 'eos']);
	});

test('#23 an unknown route is JSON 501 or 404, never HTML', { timeout: 30_000 }, async () => {
	const r = await raw('POST', `/sandboxes/${ctx.sbx.sandboxId}/pause`,
		{ headers: { 'X-API-KEY': process.env.E2B_API_KEY } });
	assert.ok([404, 501].includes(r.status), `status ${r.status}`);
	assert.match(r.headers['content-type'], /^application\/json/);
	assert.equal(typeof JSON.parse(r.body).code, 'number');
	await sleep(0);
});

test('slow and idle clients do not stall the SDK: a body sent a byte at a time, 100 idle sockets',
	{ timeout: 60_000 }, async () => {
		const net = await import('node:net');
		const { apiUrl } = await import('./lib.mjs');
		const socks = [];
		const open = () => new Promise((res, rej) => {
			const c = net.connect(Number(apiUrl.port), apiUrl.hostname, () => res(c));
			c.on('error', rej);
		});
		try {
			for (let i = 0; i < 100; i++) socks.push(await open());
			const slow = await open();
			socks.push(slow);
			slow.write('POST /v2/sandboxes HTTP/1.1\r\nHost: x\r\nX-API-KEY: e2b_00\r\n' +
				'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{');
			const drip = setInterval(() => slow.write(' '), 100);
			try {
				const t0 = Date.now();
				for (let i = 0; i < 5; i++) {
					assert.equal((await ctx.sbx.commands.run(`echo ${i}`)).stdout, `${i}\n`);
				}
				const took = Date.now() - t0;
				assert.ok(took < 5000, `five runs took ${took} ms beside the slow and idle clients`);
			} finally {
				clearInterval(drip);
			}
		} finally {
			for (const c of socks) c.destroy();
		}
	});

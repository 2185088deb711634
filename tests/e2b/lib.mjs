// tests/e2b/lib.mjs: what every E2B scenario file shares: the pinned SDK (E2BT_SDK_DIR, a
// directory tests/e2b/install filled), the listener's address for raw requests, the harness's
// facts about agenticd (its pid, its owner label), and small helpers for assertions.
// The SDK itself reads only E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (tests/e2b/run sets
// nothing else of E2B's); no scenario passes connection options to it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { pathToFileURL } from 'node:url';

const dir = process.env.E2BT_SDK_DIR;
assert.ok(dir, 'E2BT_SDK_DIR names the installed SDK (run through tests/e2b/run)');
const pkg = JSON.parse(readFileSync(`${dir}/node_modules/e2b/package.json`, 'utf8'));
export const sdkVersion = pkg.version;
export const e2b = await import(pathToFileURL(`${dir}/node_modules/e2b/${pkg.module}`).href);
export const { Sandbox } = e2b;

export const apiUrl = new URL(process.env.E2B_API_URL);
export const daemonPid = Number(process.env.E2BT_DAEMON_PID);
export const ownerLabel = process.env.E2BT_OWNER_LABEL || '';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// rejects(promise, Class, check?): the promise rejects with an instance of exactly that SDK
// error class (or a subclass), and check(err) holds; returns the error.
export async function rejects(p, cls, check) {
	let err;
	try {
		await p;
	} catch (e) {
		err = e;
	}
	assert.ok(err, `expected ${cls.name}, the call resolved`);
	assert.ok(err instanceof cls,
		`expected ${cls.name}, got ${err?.constructor?.name}: ${err?.message}`);
	if (check) check(err);
	return err;
}

// raw(method, path, {headers, body, keepAlive}): one request on the listener, outside the SDK,
// on a connection of its own (Connection: close unless keepAlive, as the SDK's undici asks).
// Resolves {status, headers, body: Buffer}.
export function raw(method, path, { headers = {}, body, keepAlive = false } = {}) {
	return new Promise((resolve, reject) => {
		const agent = keepAlive ? new http.Agent({ keepAlive: true, maxSockets: 1 }) : false;
		const req = http.request({ host: apiUrl.hostname, port: apiUrl.port, method, path,
			headers, agent }, (res) => {
			const parts = [];
			res.on('data', (c) => parts.push(c));
			res.on('end', () => {
				if (agent) agent.destroy();
				resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(parts) });
			});
			res.on('error', reject);
		});
		req.on('error', reject);
		req.setTimeout(30000, () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
		if (body !== undefined) req.write(body);
		req.end();
	});
}

// Connect-JSON envelopes of a streamed answer: [{flags, json}]
export function envelopes(buf) {
	const out = [];
	for (let i = 0; i + 5 <= buf.length;) {
		const len = buf.readUInt32BE(i + 1);
		out.push({ flags: buf[i], json: JSON.parse(buf.subarray(i + 5, i + 5 + len).toString()) });
		i += 5 + len;
	}
	return out;
}

export function envelope(obj, flags = 0) {
	const body = Buffer.from(JSON.stringify(obj));
	const head = Buffer.alloc(5);
	head[0] = flags;
	head.writeUInt32BE(body.length, 1);
	return Buffer.concat([head, body]);
}

// agenticd's open descriptors (the suite runs as root beside it)
export function daemonFds() {
	return readdirSync(`/proc/${daemonPid}/fd`).length;
}

// The engine's containers of this suite's agenticd whose inspect output names id anywhere
// (name, labels, env, mounts): the positive control of "the container is gone".
export function containersNaming(id) {
	if (!ownerLabel) return null;
	const ids = execFileSync('docker', ['ps', '-aq', '--filter', `label=${ownerLabel}`],
		{ encoding: 'utf8' }).split('\n').filter(Boolean);
	const named = [];
	for (const c of ids) { // one at a time: another sandbox's container may go meanwhile
		let text;
		try {
			text = execFileSync('docker', ['inspect', c], { encoding: 'utf8', stdio: 'pipe' });
		} catch {
			continue;
		}
		if (text.includes(id)) named.push(c);
	}
	return named;
}

// waitFor(fn, ms): polls fn (async) until it returns truthy, or throws after ms
export async function waitFor(fn, ms, what) {
	const end = Date.now() + ms;
	for (;;) {
		const v = await fn();
		if (v) return v;
		if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
		await sleep(100);
	}
}

export const text = (b) => Buffer.from(b).toString();

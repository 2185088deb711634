// tests/fleet/fleet_e2b.mjs: the real e2b SDK, pointed at one node (E2B_API_URL and
// E2B_SANDBOX_URL: node-a's E2B listener, E2B_API_KEY: a key of node-a's), creates a sandbox
// (argv[2] "create": placement puts it where it fits) or connects to one (argv[2] its id) and
// drives it at once: a command, a file written and read, a PTY, getInfo, kill (argv[3]
// "keep": not killed); or (argv[2] "list", argv[3] Sandbox.list's options as JSON) reads the
// fleet-wide list page by page. Every step is one line "STEP=JSON" on stdout, or
// "STEP!=message" when it threw; tests/fleet/test_fleet_e2b checks them. Run by that test only.
import { Sandbox } from '../e2b/lib.mjs';

const id = process.argv[2];
const say = (k, v) => console.log(`${k}=${JSON.stringify(v)}`);
const step = async (k, f) => {
	try {
		say(k, await f());
	} catch (e) {
		console.log(`${k}!=${e?.constructor?.name}: ${e?.message}`);
	}
};
if (id === 'list') {
	await step('list', async () => {
		const p = Sandbox.list(JSON.parse(process.argv[3] || '{}'));
		const ids = [];
		let pages = 0;
		while (p.hasNext && pages < 20) {
			pages++;
			for (const s of await p.nextItems()) ids.push(s.sandboxId);
		}
		return { ids, pages };
	});
	process.exit(0);
}
const how = id === 'create' ? 'create' : 'connect';
const sbx = await (id === 'create' ? Sandbox.create() : Sandbox.connect(id)).catch((e) => {
	console.log(`${how}!=${e?.constructor?.name}: ${e?.message}`);
	process.exit(1);
});
say(how, sbx.sandboxId);
await step('run', async () => {
	const r = await sbx.commands.run('echo relayed-$((6*7)); id -u');
	return [r.exitCode, r.stdout.trim().split('\n')];
});
await step('files', async () => {
	await sbx.files.write('/home/user/through-a.txt', 'written through node-a');
	return await sbx.files.read('/home/user/through-a.txt');
});
await step('pty', async () => {
	let out = '';
	const h = await sbx.pty.create({ cols: 80, rows: 24,
		onData: (d) => { out += Buffer.from(d).toString(); } });
	await sbx.pty.sendInput(h.pid, new TextEncoder().encode('stty size; exit 3\n'));
	const code = await h.wait().then((r) => r.exitCode, (e) => e.exitCode);
	return [code, /24 80/.test(out)];
});
await step('info', async () => (await sbx.getInfo()).sandboxId);
if (process.argv[3] !== 'keep') await step('kill', async () => await sbx.kill());

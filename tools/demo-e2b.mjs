// tools/demo-e2b.mjs: the E2B part of `make demo`: the real e2b SDK (build/e2b-node/sdk, from
// tests/e2b/install) with nothing but E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set: create a
// sandbox, run a command, write and read a file, kill it. Agent code written for hosted E2B
// runs unchanged; this is all of its setup.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const dir = process.argv[2];
const pkg = JSON.parse(readFileSync(`${dir}/node_modules/e2b/package.json`, 'utf8'));
const { Sandbox } = await import(pathToFileURL(`${dir}/node_modules/e2b/${pkg.module}`).href);
const show = (code, v) => console.log(`  ${code}\n    → ${v}`);

const sbx = await Sandbox.create();
show('const sbx = await Sandbox.create()', `sandbox ${sbx.sandboxId}`);
const r = await sbx.commands.run('echo "hello from $(id -un) (uid $(id -u)) in $(pwd)"');
show("await sbx.commands.run('echo \"hello from $(id -un) (uid $(id -u)) in $(pwd)\"')",
	`exitCode ${r.exitCode}, stdout ${JSON.stringify(r.stdout)}`);
const w = await sbx.files.write('/home/user/hello.txt', 'written through the SDK\n');
show("await sbx.files.write('/home/user/hello.txt', 'written through the SDK\\n')", w.path);
show("await sbx.files.read('/home/user/hello.txt')",
	JSON.stringify(await sbx.files.read('/home/user/hello.txt')));
const ls = await sbx.commands.run('ls -ln /home/user/hello.txt');
show("await sbx.commands.run('ls -ln /home/user/hello.txt')", ls.stdout.trim());
try {
	await sbx.commands.run('id -u', { user: 'root' });
	show("await sbx.commands.run('id -u', { user: 'root' })", 'ran (unexpected)');
} catch (e) {
	show("await sbx.commands.run('id -u', { user: 'root' })", `${e.constructor.name}: ${e.message}`);
}
show('await sbx.kill()', await sbx.kill());
show('await sbx.isRunning()', await sbx.isRunning());

// tests/e2b/tap.mjs: a node --test reporter printing one flat TAP line per top-level test
// (`ok N - file: name`, `not ok N - ...` with the error below as `# ` lines, `ok N # SKIP`),
// the lines tests/run counts. Node's own TAP reporter indents per file and nests.
import { basename } from 'node:path';

function errorLines(e) {
	const c = e?.cause ?? e;
	const head = `${c?.constructor?.name ?? 'Error'}: ${c?.message ?? String(c)}`;
	const stack = (c?.stack ?? '').split('\n').filter((l) => /^\s+at .*tests\/e2b\//.test(l));
	return [head, ...stack.slice(0, 3)].join('\n').split('\n').map((l) => `# ${l}\n`).join('');
}

export default async function* tap(source) {
	let n = 0;
	for await (const { type, data } of source) {
		if ((type !== 'test:pass' && type !== 'test:fail') || data.nesting !== 0) {
			if (type === 'test:diagnostic' && data.nesting === 0) yield `# ${data.message}\n`;
			continue;
		}
		const name = `${basename(data.file ?? '?')}: ${data.name}`.replace(/#/g, '');
		n++;
		if (type === 'test:fail') yield `not ok ${n} - ${name}\n${errorLines(data.details?.error)}`;
		else if (data.skip !== undefined) yield `ok ${n} # SKIP ${name}: ${data.skip}\n`;
		else yield `ok ${n} - ${name} (${Math.round(data.details?.duration_ms ?? 0)} ms)\n`;
	}
	yield `1..${n}\n`;
}

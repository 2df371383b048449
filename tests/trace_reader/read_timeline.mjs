// Loads a gpusim timeline.json with Chrome DevTools' trace engine (the
// Performance panel's parser, npm @paulirish/trace_engine: a real reader of
// the Chrome Trace Event Format from a registry the machines reach, used
// offline) and checks what it made of the file against the file's own
// events: the process and thread names (metadata events), every complete
// ("X") slice of each thread accepted into that thread's call tree (a slice
// that does not nest would be dropped), the trace's end, and no warnings.
//   node read_timeline.mjs READER_DIR TIMELINE.json
import fs from 'node:fs';
import path from 'node:path';
import {pathToFileURL} from 'node:url';

const [readerDir, file] = process.argv.slice(2);
const Trace = await import(pathToFileURL(
    path.join(readerDir, 'node_modules/@paulirish/trace_engine/models/trace/trace.js')).href);
// The engine measures layout with DOMRect, which Node lacks.
globalThis.DOMRect ??= class {
  constructor(x = 0, y = 0, width = 0, height = 0) { Object.assign(this, {x, y, width, height}); }
};

const events = JSON.parse(fs.readFileSync(file, 'utf8')).traceEvents;
const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(events);
const data = model.parsedTrace().data;

let failures = 0;
function check(ok, what) {
  if (!ok) {
    console.log(`FAIL ${file}: ${what}`);
    failures++;
  }
}

// The file's own view.
const processNames = new Map(), threadNames = new Map(), slices = new Map();
let end = 0;
for (const e of events) {
  if (e.ph === 'M' && e.name === 'process_name') processNames.set(e.pid, e.args.name);
  if (e.ph === 'M' && e.name === 'thread_name') threadNames.set(`${e.pid}/${e.tid}`, e.args.name);
  if (e.ph === 'X') slices.set(`${e.pid}/${e.tid}`, (slices.get(`${e.pid}/${e.tid}`) ?? 0) + 1);
  if (typeof e.ts === 'number') end = Math.max(end, e.ts + (e.dur ?? 0));
}

check(data.Meta.traceIsGeneric, 'not read as a generic (non-browser) trace');
for (const [pid, name] of processNames) {
  check(data.Meta.processNames.get(pid)?.args?.name === name, `process ${pid} is not named '${name}'`);
}
const threads = new Map();
for (const [pid, proc] of data.Renderer.processes) {
  for (const [tid, thread] of proc.threads) threads.set(`${pid}/${tid}`, thread);
}
let total = 0;
for (const [key, count] of slices) {
  const t = threads.get(key);
  check(t !== undefined, `thread ${key} with ${count} slices is missing`);
  if (!t) continue;
  check(t.name === threadNames.get(key), `thread ${key} is named '${t.name}', not '${threadNames.get(key)}'`);
  let nodes = 0;
  const walk = (node) => {
    nodes++;
    for (const c of node.children) walk(c);
  };
  for (const root of t.tree?.roots ?? []) walk(root);
  check(nodes === count, `thread ${key} ('${t.name}'): ${nodes} of ${count} slices in its call tree`);
  total += nodes;
}
check(Math.abs(data.Meta.traceBounds.max - end) < 1e-3, `trace ends at ${data.Meta.traceBounds.max} µs, not ${end}`);
const warnings = [...(data.Warnings.perWarning?.keys?.() ?? [])];
check(warnings.length === 0, `warnings: ${warnings.join(', ')}`);
console.log(`${file}: ${events.length} events; process ${[...processNames.values()].join(', ')}; ` +
            `${slices.size} threads, ${total} slices read into call trees; ends at ${end} µs; ` +
            `${failures} failure(s)`);
process.exit(failures ? 1 : 0);

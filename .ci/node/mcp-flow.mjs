// The demo flow through the official MCP TypeScript SDK client, against a
// running gateway's /mcp (argument 1): run the demo agent, see its pending
// approval, approve it with decide_approval and read the completed run; then
// the same with a client that answers the approval question inline
// (elicitation). Prints one line per check and exits non-zero on a failure.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const url = new URL(process.argv[2]);
let passed = 0;
let failed = 0;

function check(what, ok, detail) {
  if (ok) {
    passed++;
    console.log(`ok    ${what}`);
  } else {
    failed++;
    console.log(`FAIL  ${what}: ${JSON.stringify(detail)}`);
  }
}

async function connect(name, capabilities) {
  const client = new Client({ name, version: '1.0.0' }, { capabilities });
  await client.connect(new StreamableHTTPClientTransport(url));
  return client;
}

async function tool(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) throw new Error(`${name}: ${res.content?.[0]?.text}`);
  return res.structuredContent;
}

async function approveWithTool() {
  const client = await connect('ci-mcp-flow', {});
  const paused = await tool(client, 'run_agent', { agent: 'demo', input: 'deploy web to staging' });
  check('run_agent pauses the demo run on one approval', paused.status === 'paused' && paused.pending_approvals.length === 1, paused);
  const id = paused.pending_approvals[0]?.id;
  const list = await tool(client, 'list_approvals', { status: 'pending' });
  check('list_approvals shows it', list.items.some((a) => a.id === id && a.tool === 'deploy'), list);
  const decided = await tool(client, 'decide_approval', { approval_id: id, decision: 'approve', reason: 'ci' });
  check('decide_approval approves it via mcp', decided.status === 'approved' && decided.decided_via === 'mcp', decided);
  let run = paused;
  for (let i = 0; i < 300 && !['completed', 'failed', 'cancelled'].includes(run.status); i++) {
    await new Promise((r) => setTimeout(r, 100));
    run = await tool(client, 'get_run', { run_id: paused.id });
  }
  check('get_run reads the completed run', run.status === 'completed' && run.output.includes('deployed'), run);
  await client.close();
}

async function approveInline() {
  const client = await connect('ci-mcp-flow-elicit', { elicitation: {} });
  let asked = '';
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked = req.params.message;
    return { action: 'accept', content: { decision: 'approve' } };
  });
  const run = await tool(client, 'run_agent', { agent: 'demo', input: 'deploy api to production' });
  check('elicitation asks about the deploy', asked.includes('deploy') && asked.includes('production'), asked);
  check('run_agent completes after the inline approval', run.status === 'completed' && run.output.includes('deployed'), run);
  await client.close();
}

try {
  await approveWithTool();
  await approveInline();
} catch (err) {
  failed++;
  console.log(`FAIL  ${err.stack ?? err}`);
}
console.log(`mcp-flow: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);

// The MCP TypeScript SDK's own client (@modelcontextprotocol/sdk) calling one tool through `signoff mcp-gateway`,
// the way an application embedding it would: streamable HTTP with a bearer token, the elicitation capability
// declared, and a handler that answers every form it is shown.
//
// Usage: MCP_TOKEN=<bearer> node tests/js/mcp_client.mjs <url> <tool> <json args> <approve|deny|wait> [reason]
//
// Each `elicitation/create` the server sends is answered `accept` with {decision, reason} from the command line.
// Prints one JSON line on stdout: {protocolVersion, elicitations: [the params of each form shown], result: the
// CallToolResult}. A call that fails at the protocol level prints {protocolVersion, elicitations, error} and
// exits 1.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [url, tool, args, decision, reason = ''] = process.argv.slice(2);
if (!url || !tool || !args || !decision) {
  console.error('usage: node mcp_client.mjs <url> <tool> <json args> <approve|deny|wait> [reason]');
  process.exit(2);
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN ?? ''}` } },
});
const client = new Client({ name: 'signoff-ts-client-test', version: '1.0.0' }, { capabilities: { elicitation: {} } });
const elicitations = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  elicitations.push(request.params);
  return { action: 'accept', content: { decision, reason } };
});

let report;
let code = 0;
await client.connect(transport);
try {
  const result = await client.callTool({ name: tool, arguments: JSON.parse(args) }, undefined, { timeout: 60_000 });
  report = { protocolVersion: transport.protocolVersion, elicitations, result };
} catch (error) {
  report = { protocolVersion: transport.protocolVersion, elicitations, error: String(error) };
  code = 1;
} finally {
  await client.close();
}
process.stdout.write(`${JSON.stringify(report)}\n`);
process.exit(code);

// The TypeScript SDK's equivalent of the bench's tool `convert_temperature` (three
// arguments; the same tool benches/mcp.rs links into Klaw's engine, benches/rmcp-peer
// gives rmcp and benches/fastmcp_echo.py gives FastMCP), written as the SDK's README
// shows: an McpServer with registerTool and a zod input schema, over stdio, or with
// `--http 127.0.0.1:0` over Streamable HTTP with stateful sessions (one transport and
// server per session, node:http, which sets TCP_NODELAY), its address printed on stderr.
//
// Run with Node 22 and the SDK scripts/setup-test-tools.sh installs
// (`<cache>/node22/node_modules`, pinned in scripts/package-test.json):
//   <cache>/node22/node_modules/.bin/node ts_sdk_echo.cjs [--http 127.0.0.1:0]
// The modules are found beside that Node (or in NODE_PATH): this file is not in their tree.

"use strict";

const path = require("node:path");
const { createRequire } = require("node:module");

const modules = process.env.NODE_PATH || path.resolve(process.execPath, "../../..");
const need = createRequire(path.join(modules, "..", "package.json"));
const { McpServer } = need("@modelcontextprotocol/sdk/server/mcp.js");
const { StdioServerTransport } = need("@modelcontextprotocol/sdk/server/stdio.js");
const { StreamableHTTPServerTransport } = need("@modelcontextprotocol/sdk/server/streamableHttp.js");
const { isInitializeRequest } = need("@modelcontextprotocol/sdk/types.js");
const { z } = need("zod");

const SCALES = { C: "C", CELSIUS: "C", F: "F", FAHRENHEIT: "F", K: "K", KELVIN: "K" };

function scaleOf(s) {
  const k = s.trim().toUpperCase();
  if (!(k in SCALES)) throw new Error(`unknown scale \`${k}\`: use C, F or K`);
  return SCALES[k];
}

function convert(value, scale, target) {
  const s = scaleOf(scale);
  const c = s === "C" ? value : s === "F" ? ((value - 32) * 5) / 9 : value - 273.15;
  if (c < -273.15) throw new Error("below absolute zero");
  const t = scaleOf(target);
  const out = t === "C" ? c : t === "F" ? (c * 9) / 5 + 32 : c + 273.15;
  return `${out.toFixed(2)} ${target.toUpperCase()}`;
}

function server() {
  const s = new McpServer({ name: "bench", version: "1.0.0" });
  s.registerTool(
    "convert_temperature",
    {
      description: "Convert a temperature between Celsius (C), Fahrenheit (F) and Kelvin (K)",
      inputSchema: {
        value: z.number().describe("The temperature value"),
        scale: z.string().describe("Its scale: C, F or K"),
        target: z.string().default("C").describe("The scale wanted: C, F or K"),
      },
    },
    async ({ value, scale, target }) => ({
      content: [{ type: "text", text: convert(value, scale, target) }],
    }),
  );
  return s;
}

async function http(bind) {
  const nodeHttp = require("node:http");
  const { randomUUID } = require("node:crypto");
  const i = bind.lastIndexOf(":");
  const [host, port] = [bind.slice(0, i), Number(bind.slice(i + 1))];
  const sessions = new Map();
  const refuse = (res, status, message) => {
    res.writeHead(status, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
  };
  const web = nodeHttp.createServer(async (req, res) => {
    try {
      if (new URL(req.url, "http://x").pathname !== "/mcp") return refuse(res, 404, "not found");
      const id = req.headers["mcp-session-id"];
      let body;
      if (req.method === "POST") {
        const chunks = [];
        for await (const c of req) chunks.push(c);
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      }
      let transport = id && sessions.get(id);
      if (!transport) {
        if (id || req.method !== "POST" || !isInitializeRequest(body)) {
          return refuse(res, 400, "no valid session");
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sid) => sessions.set(sid, transport),
        });
        transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
        await server().connect(transport);
      }
      await transport.handleRequest(req, res, body);
    } catch (e) {
      if (!res.headersSent) refuse(res, 500, String(e));
    }
  });
  web.keepAliveTimeout = 60_000;
  await new Promise((ok) => web.listen(port, host, ok));
  const a = web.address();
  process.stderr.write(`ts-sdk: MCP over HTTP at http://${a.address}:${a.port}/mcp\n`);
}

const args = process.argv.slice(2);
if (args.length === 2 && args[0] === "--http") {
  http(args[1]);
} else {
  server().connect(new StdioServerTransport());
}

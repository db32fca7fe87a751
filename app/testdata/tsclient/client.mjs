// An IDE's MCP client made with the official TypeScript SDK, given only
// the gateway's URL of an MCP server: the SDK's OAuth client discovers the
// gateway's authorization server from the 401, registers, and asks for the
// person's authorization; this script plays the person's browser (cookies
// kept, redirects followed through the organisation's sign-in) and
// approves the consent page as the agent named, then lists the tools.
//
// node client.mjs <gateway>/mcp/<server> <agent>
// prints {"tools": [names]} and exits 0, or prints the error and exits 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [endpoint, agent] = process.argv.slice(2);
const redirectUrl = "http://127.0.0.1:9/callback";

// browse follows url as a browser would, keeping cookies per host, until
// the gateway sends it to the client's redirect URL; on the way it
// approves the consent page as agent. It returns the authorization code.
async function browse(url) {
  const jar = new Map();
  let method = "GET";
  let body;
  for (let hop = 0; hop < 30; hop++) {
    const u = new URL(url);
    const cookies = jar.get(u.hostname) ?? new Map();
    const headers = { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") };
    if (body) headers["content-type"] = "application/x-www-form-urlencoded";
    const res = await fetch(url, { method, body, headers, redirect: "manual" });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const i = pair.indexOf("=");
      cookies.set(pair.slice(0, i).trim(), pair.slice(i + 1).trim());
    }
    jar.set(u.hostname, cookies);
    method = "GET";
    body = undefined;
    if (res.status >= 300 && res.status < 400) {
      const next = new URL(res.headers.get("location"), url).toString();
      if (next.startsWith(redirectUrl)) {
        const code = new URL(next).searchParams.get("code");
        if (!code) throw new Error("redirected without a code: " + next);
        return code;
      }
      url = next;
      continue;
    }
    const page = await res.text();
    const csrf = page.match(/name="csrf" value="([^"]+)"/);
    if (res.status !== 200 || !csrf) throw new Error(`page ${url} answered ${res.status}: ${page.slice(0, 500)}`);
    method = "POST";
    body = new URLSearchParams({ csrf: csrf[1], decision: "allow", agent }).toString();
  }
  throw new Error("too many redirects");
}

class Provider {
  constructor() { this.code = undefined; this._tokens = undefined; this._client = undefined; this._verifier = ""; }
  get redirectUrl() { return redirectUrl; }
  get clientMetadata() {
    return { redirect_uris: [redirectUrl], client_name: "TypeScript IDE", grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"], token_endpoint_auth_method: "none" };
  }
  clientInformation() { return this._client; }
  saveClientInformation(info) { this._client = info; }
  tokens() { return this._tokens; }
  saveTokens(t) { this._tokens = t; }
  async redirectToAuthorization(url) { this.code = await browse(url.toString()); }
  saveCodeVerifier(v) { this._verifier = v; }
  codeVerifier() { return this._verifier; }
}

async function main() {
  const provider = new Provider();
  const connect = async () => {
    const client = new Client({ name: "ts-ide", version: "1" });
    const transport = new StreamableHTTPClientTransport(new URL(endpoint), { authProvider: provider });
    await client.connect(transport);
    return { client, transport };
  };
  let c;
  try {
    c = await connect();
  } catch (e) {
    if (!(e instanceof UnauthorizedError) || !provider.code) throw e;
    const transport = new StreamableHTTPClientTransport(new URL(endpoint), { authProvider: provider });
    await transport.finishAuth(provider.code);
    c = await connect();
  }
  const { tools } = await c.client.listTools();
  console.log(JSON.stringify({ tools: tools.map((t) => t.name), token_prefix: provider.tokens().access_token.slice(0, 9) }));
  await c.client.close();
}

main().catch((e) => { console.error(String(e?.stack ?? e)); process.exit(1); });

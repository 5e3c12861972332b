# A Streamable HTTP MCP server that is also its own OAuth authorization server
# (RFC 9728 and RFC 8414 metadata, dynamic registration, code flow with PKCE
# S256, refresh), for tests/mcp_oauth.rs. Usage: oauth_server.py PORT
# [EXPIRES_IN [die-after-list]]; prints its port; logs each token issued (and
# how) on stderr. With die-after-list an access token stops being accepted
# once it has listed the tools, as if it expired mid-session.
import json, sys, hashlib, base64, urllib.parse, secrets
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
clients = {}; codes = {}; tokens = {}; refresh = {}
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def send(self, code, body=None, headers=()):
        self.send_response(code)
        for k, v in headers: self.send_header(k, v)
        data = json.dumps(body).encode() if body is not None else b""
        if body is not None: self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def base(self): return "http://127.0.0.1:%d" % self.server.server_port
    def do_GET(self):
        u = urllib.parse.urlparse(self.path); q = dict(urllib.parse.parse_qsl(u.query))
        if u.path == "/.well-known/oauth-protected-resource/mcp":
            return self.send(200, {"resource": self.base() + "/mcp", "authorization_servers": [self.base()], "scopes_supported": ["tools"]})
        if u.path == "/.well-known/oauth-authorization-server":
            b = self.base()
            return self.send(200, {"issuer": b, "authorization_endpoint": b + "/authorize", "token_endpoint": b + "/token", "registration_endpoint": b + "/register", "code_challenge_methods_supported": ["S256"]})
        if u.path == "/authorize":
            assert q["client_id"] in clients and q["code_challenge_method"] == "S256"
            code = secrets.token_hex(8); codes[code] = q
            return self.send(302, None, [("location", q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": q["state"]}))])
        if u.path == "/mcp": return self.send(405)
        self.send(404, {})
    def do_POST(self):
        n = int(self.headers.get("content-length", 0)); raw = self.rfile.read(n)
        if self.path == "/register":
            cid = "client-" + secrets.token_hex(4); clients[cid] = json.loads(raw); return self.send(201, {"client_id": cid})
        if self.path == "/token":
            f = dict(urllib.parse.parse_qsl(raw.decode()))
            if f["grant_type"] == "authorization_code":
                q = codes.pop(f["code"], None)
                ch = base64.urlsafe_b64encode(hashlib.sha256(f["code_verifier"].encode()).digest()).rstrip(b"=").decode()
                if not q or ch != q["code_challenge"]: return self.send(400, {"error": "invalid_grant"})
            elif f["grant_type"] == "refresh_token":
                if f["refresh_token"] not in refresh: return self.send(400, {"error": "invalid_grant"})
            at = "AT-" + secrets.token_hex(8); rt = "RT-" + secrets.token_hex(8)
            tokens[at] = 1; refresh[rt] = 1
            sys.stderr.write("issued %s via %s\n" % (at, f["grant_type"])); sys.stderr.flush()
            return self.send(200, {"access_token": at, "refresh_token": rt, "token_type": "Bearer", "expires_in": int(sys.argv[2]) if len(sys.argv) > 2 else 3600})
        if self.path == "/mcp":
            auth = self.headers.get("authorization", "")
            if auth[7:] not in tokens:
                return self.send(401, {}, [("www-authenticate", 'Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="tools"' % self.base())])
            m = json.loads(raw)
            if "id" not in m: return self.send(202)
            r = {}
            if m["method"] == "initialize": r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}}
            elif m["method"] == "tools/list":
                r = {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]}
                if sys.argv[3:] == ["die-after-list"]:
                    tokens.pop(auth[7:], None); sys.stderr.write("expired %s\n" % auth[7:]); sys.stderr.flush()
            elif m["method"] == "tools/call": r = {"content": [{"type": "text", "text": "you are authorized"}]}
            return self.send(200, {"jsonrpc": "2.0", "id": m["id"], "result": r})
        self.send(404, {})
s = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
print(s.server_port, flush=True)
s.serve_forever()

//! A small HTTP/1.1 client over a plain TCP socket for the `buddy serve`
//! tests: it sends exactly the headers it is given (so tests can forge
//! `Host` and `Origin`), reads fixed-length and chunked bodies, and reads
//! Server-Sent Events as they arrive. The browser test speaks WebDriver
//! (JSON over HTTP) to chromedriver with it too.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }

    /// The first header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<u64>,
    pub event: String,
    pub data: serde_json::Value,
}

pub struct Client {
    pub addr: SocketAddr,
    /// Sent as `Authorization: Bearer …` when set.
    pub token: Option<String>,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Client {
        Client { addr, token: None }
    }

    fn send(
        &self,
        method: &str,
        path: &str,
        extra: &[(&str, &str)],
        body: Option<&str>,
    ) -> TcpStream {
        let stream = TcpStream::connect(self.addr).expect("connect to buddy serve");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("read timeout");
        let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        if !extra.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req.push_str(&format!("Host: {}\r\n", self.addr));
        }
        if let Some(t) = &self.token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        for (k, v) in extra {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(b) = body {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        req.push_str("\r\n");
        if let Some(b) = body {
            req.push_str(b);
        }
        (&stream).write_all(req.as_bytes()).expect("send request");
        stream
    }

    /// A whole request and response.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        extra: &[(&str, &str)],
        body: Option<&str>,
    ) -> Response {
        let stream = self.send(method, path, extra, body);
        let mut r = BufReader::new(stream);
        let (status, headers) = read_head(&mut r);
        let chunked = header(&headers, "transfer-encoding").is_some_and(|v| v.contains("chunked"));
        let body = if chunked {
            let mut out = Vec::new();
            while let Some(chunk) = read_chunk(&mut r) {
                out.extend(chunk);
            }
            out
        } else if let Some(len) = header(&headers, "content-length").and_then(|v| v.parse().ok()) {
            let mut out = vec![0; len];
            r.read_exact(&mut out).expect("body");
            out
        } else {
            let mut out = Vec::new();
            let _ = r.read_to_end(&mut out);
            out
        };
        Response {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }

    pub fn get(&self, path: &str) -> Response {
        self.request("GET", path, &[], None)
    }

    pub fn post(&self, path: &str, body: &str) -> Response {
        self.request("POST", path, &[], Some(body))
    }

    /// POSTs `body` as JSON.
    pub fn post_json(&self, path: &str, body: &serde_json::Value) -> Response {
        self.post(path, &body.to_string())
    }

    pub fn delete(&self, path: &str) -> Response {
        self.request("DELETE", path, &[], None)
    }

    /// Opens an event stream; the status, and a reader when it is 200.
    pub fn sse(
        &self,
        method: &str,
        path: &str,
        extra: &[(&str, &str)],
        body: Option<&str>,
    ) -> (Response, Option<SseStream>) {
        let stream = self.send(method, path, extra, body);
        let mut r = BufReader::new(stream);
        let (status, headers) = read_head(&mut r);
        if status != 200 {
            let mut rest = Vec::new();
            let chunked =
                header(&headers, "transfer-encoding").is_some_and(|v| v.contains("chunked"));
            if chunked {
                while let Some(c) = read_chunk(&mut r) {
                    rest.extend(c);
                }
            } else {
                let _ = r.read_to_end(&mut rest);
            }
            let resp = Response {
                status,
                headers,
                body: String::from_utf8_lossy(&rest).into_owned(),
            };
            return (resp, None);
        }
        let chunked = header(&headers, "transfer-encoding").is_some_and(|v| v.contains("chunked"));
        let resp = Response {
            status,
            headers,
            body: String::new(),
        };
        (
            resp,
            Some(SseStream {
                r,
                chunked,
                buf: String::new(),
            }),
        )
    }
}

pub struct SseStream {
    r: BufReader<TcpStream>,
    chunked: bool,
    buf: String,
}

impl SseStream {
    /// The next event (comments skipped), or `None` when the stream ends.
    pub fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(i) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..i + 2).collect();
                let mut id = None;
                let mut event = String::from("message");
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() {
                    continue;
                }
                let data = serde_json::from_str(&data)
                    .unwrap_or_else(|e| panic!("event data is not JSON ({e}): {data}"));
                return Some(SseEvent { id, event, data });
            }
            if !self.read_some() {
                return None;
            }
        }
    }

    /// Reads what the server sends next (events or a keep-alive) into the
    /// buffer; false once the stream has ended.
    pub fn read_some(&mut self) -> bool {
        let more = if self.chunked {
            read_chunk(&mut self.r)
        } else {
            let mut b = vec![0; 4096];
            match self.r.read(&mut b) {
                Ok(n) if n > 0 => {
                    b.truncate(n);
                    Some(b)
                }
                _ => None,
            }
        };
        match more {
            Some(more) => {
                self.buf.push_str(&String::from_utf8_lossy(&more));
                true
            }
            None => false,
        }
    }

    /// Events until one named `name` (included).
    pub fn until(&mut self, name: &str) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(ev) = self.next() {
            let stop = ev.event == name;
            out.push(ev);
            if stop {
                return out;
            }
        }
        panic!("the stream ended before a {name} event: {out:?}");
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn read_head(r: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    r.read_line(&mut line).expect("status line");
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).expect("header");
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    (status, headers)
}

/// One chunk of a chunked body; `None` at the last (or at EOF).
fn read_chunk(r: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut size = String::new();
    if r.read_line(&mut size).ok()? == 0 {
        return None;
    }
    let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
    if n == 0 {
        return None;
    }
    let mut chunk = vec![0; n];
    r.read_exact(&mut chunk).ok()?;
    let mut crlf = [0; 2];
    r.read_exact(&mut crlf).ok()?;
    Some(chunk)
}

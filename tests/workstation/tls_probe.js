// SPDX-License-Identifier: GPL-3.0-or-later
// The bypass battery's TLS probe, run by node inside the sandbox: a CONNECT to TARGET
// through the gate (HTTP_PROXY) by hand, then what MODE says, and one line
//   RESULT ID tunnel=CODE tls=ok|refused|answered|waiting
// ok: a TLS server answered a request; refused: the tunnel closed (or the handshake
// failed) with nothing from a server; answered: bytes came back to a non-TLS probe or
// to a rebuilt ClientHello.
//
// usage: node tls_probe.js ID TARGET MODE [NAME [HOST]]
// MODE: sni (a ClientHello naming NAME; NAME "" sends none), split (the same, written 16
// bytes at a time, 5 ms apart: many TCP segments), quiet (send nothing: a protocol
// whose server speaks first), ssh (an SSH banner), h2c (HTTP/2 prior knowledge,
// cleartext), hello (node's own ClientHello for TARGET's host, rebuilt with the
// server_name extensions of VARIANTS[NAME]). HOST: the Host header after the handshake
// (default NAME). Every byte a server could see carries c-ID (a rebuilt ClientHello in
// an extension of a GREASE type, which servers ignore).
const net = require("net");
const stream = require("stream");
const tls = require("tls");

const [id, target, mode, name, host] = process.argv.slice(2);
const other = Buffer.from("b-unlisted.test");
const text = (...parts) => Buffer.from(parts.join(""), "latin1");
// Each a list of server_name extensions, each a list of [name type, name]; GOOD is the
// CONNECT host. The name that is not one: 300 bytes of DNS characters (one label of 33,
// four of 63 and GOOD's).
const VARIANTS = {
  rebuilt: (good) => [[[0, good]]],
  "two-names-other-first": (good) => [[[0, other], [0, good]]],
  "two-names-other-second": (good) => [[[0, good], [0, other]]],
  "two-extensions": (good) => [[[0, other]], [[0, good]]],
  "name-type": (good) => [[[1, good]]],
  "name-type-first": (good) => [[[1, other], [0, good]]],
  nul: (good) => [[[0, text(good, "\0.", other)]]],
  space: (good) => [[[0, text(good, " ", other)]]],
  "300-bytes": (good) => [[[0, text(["a".repeat(33), ...Array(4).fill("a".repeat(63)), good].join("."))]]],
  "label-over-63": (good) => [[[0, text("x".repeat(64), ".", good)]]],
  empty: () => [[[0, Buffer.alloc(0)]]],
};
const proxy = new URL(process.env.HTTP_PROXY);
let tunnel = "none";
const say = (result) => {
  console.log(`RESULT ${id} tunnel=${tunnel} tls=${result}`);
  process.exit(0);
};
// Longer than the gate's wait for a first byte (request_start_timeout).
setTimeout(() => say("waiting"), mode === "quiet" ? 25000 : 8000);

const raw = net.connect(proxy.port, proxy.hostname, () =>
  raw.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`));
raw.on("error", () => say("refused"));
let head = "";
raw.on("data", function connectAnswer(chunk) {
  head += chunk.toString("latin1");
  if (!head.includes("\r\n\r\n")) return;
  raw.removeListener("data", connectAnswer);
  tunnel = head.split(" ")[1];
  if (tunnel === "200") (mode === "hello" ? rebuiltHello() : speak());
  else say("none");
});

function speak() {
  const banner = {quiet: "", ssh: `SSH-2.0-c-${id}\r\n`, h2c: `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nc-${id}`}[mode];
  if (banner !== undefined) {
    raw.write(banner);
    raw.on("data", () => say("answered"));
    raw.on("close", () => say("refused"));
    return;
  }
  const secure = tls.connect({socket: mode === "split" ? inPieces(raw) : raw, servername: name,
                              rejectUnauthorized: false, ALPNProtocols: ["http/1.1"]}, () =>
    secure.write(`GET /c-${id} HTTP/1.1\r\nHost: ${host || name}\r\nConnection: close\r\n\r\n`));
  secure.on("data", () => say("ok"));
  secure.on("error", () => say("refused"));
  secure.on("close", () => say("refused"));
}

// Node's ClientHello for the CONNECT host (one record, as its TLS stack writes it to a
// socket), rebuilt with VARIANTS[NAME]'s server_name extensions where its own was, and
// c-ID first; written raw.
function rebuiltHello() {
  const good = target.slice(0, target.lastIndexOf(":"));
  const capture = new stream.Duplex({write(record) {
    const body = record.subarray(9, 9 + record.readUIntBE(6, 3));
    let at = 2 + 32;
    at += 1 + body[at];
    at += 2 + body.readUInt16BE(at);
    at += 1 + body[at];
    const extensions = [extension(0x0a0a, text(`c-${id} `))];
    for (let next = at + 2; next < body.length; next += 4 + body.readUInt16BE(next + 2)) {
      const type = body.readUInt16BE(next);
      if (type !== 0) extensions.push(body.subarray(next, next + 4 + body.readUInt16BE(next + 2)));
      else for (const names of VARIANTS[name](text(good))) extensions.push(extension(0, serverNames(names)));
    }
    const hello = Buffer.concat([body.subarray(0, at), vector16(Buffer.concat(extensions))]);
    const message = Buffer.concat([Buffer.from([1, 0, hello.length >> 8, hello.length & 0xff]), hello]);
    raw.write(Buffer.concat([Buffer.from([22, 3, 1]), vector16(message)]));
    raw.on("data", () => say("answered"));
    raw.on("close", () => say("refused"));
  }, read() {}});
  tls.connect({socket: capture, servername: good, rejectUnauthorized: false, ALPNProtocols: ["http/1.1"]})
    .on("error", () => {});
}

function vector16(bytes) {
  const length = Buffer.alloc(2);
  length.writeUInt16BE(bytes.length);
  return Buffer.concat([length, bytes]);
}
const extension = (type, data) => Buffer.concat([Buffer.from([type >> 8, type & 0xff]), vector16(data)]);
const serverNames = (names) => vector16(Buffer.concat(names.map(([type, bytes]) =>
  Buffer.concat([Buffer.from([type]), vector16(bytes)]))));

// SOCKET as a stream whose every write leaves in 16-byte pieces, 5 ms apart: a 1.5 KB
// ClientHello (post-quantum key shares) in about 100 segments and half a second, within
// the test server's 2 s for a whole handshake.
function inPieces(socket) {
  socket.setNoDelay(true);
  const pieces = new stream.Duplex({
    write(data, _encoding, done) {
      const parts = [];
      for (let at = 0; at < data.length; at += 16) parts.push(data.subarray(at, at + 16));
      const next = () => {
        if (!parts.length) return done();
        socket.write(parts.shift());
        setTimeout(next, 5);
      };
      next();
    },
    read() {},
  });
  socket.on("data", (chunk) => pieces.push(chunk));
  socket.on("close", () => pieces.push(null));
  return pieces;
}

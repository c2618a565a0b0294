// SPDX-License-Identifier: GPL-3.0-or-later
// The bypass battery's TLS probe, run by node inside the sandbox: a CONNECT to TARGET
// through the gate (HTTP_PROXY) by hand, then what MODE says, and one line
//   RESULT ID tunnel=CODE tls=ok|refused|answered|waiting
// ok: a TLS server answered a request; refused: the tunnel closed (or the handshake
// failed) with nothing from a server; answered: bytes came back to a non-TLS probe.
//
// usage: node tls_probe.js ID TARGET MODE [NAME [HOST]]
// MODE: sni (a ClientHello naming NAME; NAME "" sends none), split (the same, written 16
// bytes at a time, 5 ms apart: many TCP segments), quiet (send nothing: a protocol
// whose server speaks first), ssh (an SSH banner), h2c (HTTP/2 prior knowledge,
// cleartext). HOST: the Host header after the handshake (default NAME). Every byte a
// server could see carries c-ID.
const net = require("net");
const stream = require("stream");
const tls = require("tls");

const [id, target, mode, name, host] = process.argv.slice(2);
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
  if (tunnel === "200") speak();
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

// telegram-test-api (a fake Telegram Bot API, from npm; scripts/setup-test-tools.sh
// installs it under <cache>/node22) for klaw-engine/tests/telegram.rs:
//   NODE_PATH=<cache>/node22/node_modules node start.js <port> [host]
// (port 0 = let the OS pick; host defaults to 127.0.0.1)
// Prints exactly one line "listening <port>" on stdout when ready; exits when stdin closes
// (or on SIGTERM/SIGINT). Set LONGPOLL=0 to get the library's stock behaviour, where
// /bot<T>/getUpdates always answers at once and marks what it returns as read. By default
// /bot<T>/getUpdates behaves like Telegram's: `offset` confirms every update below it, an
// update is sent again until it is confirmed (so a bot that restarts before confirming
// gets it again), and with timeout>0 and nothing to send it waits (up to the timeout) for
// a user message.
'use strict';
const path = require('path');
const TelegramServer = require('telegram-test-api');
// The express telegram-test-api itself uses (another major version may be hoisted beside
// it): its body parsers then see that a body was already read.
const express = require(require.resolve('express', {
  paths: [path.dirname(require.resolve('telegram-test-api'))],
}));

const portArg = process.argv[2] === undefined ? '9000' : String(process.argv[2]);
const host = process.argv[3] || '127.0.0.1';
// "0" stays a string: the lib does `config.port || 9000`, which would turn numeric 0 into 9000
const port = portArg === '0' ? '0' : Number(portArg);

// The lib's client routes start async work without awaiting it (e.g. POST /sendMessage without
// `botToken` rejects an assert); under Node >= 15 that would kill the process. Log it instead.
process.on('unhandledRejection', (err) => {
  process.stderr.write(`unhandledRejection: ${err && err.message ? err.message : err}\n`);
});

const server = new TelegramServer({ port, host, storeTimeout: 3600 });

if (process.env.LONGPOLL !== '0') {
  const inner = server.webServer;
  const outer = express();
  outer.use(express.json());
  outer.use(express.urlencoded({ extended: true }));
  outer.all('/bot:token/getUpdates', (req, res) => {
    const param = (name) => {
      const v = req.body && req.body[name] !== undefined ? req.body[name] : req.query[name];
      return Number(v) || 0;
    };
    const seconds = Math.min(param('timeout'), 50);
    const offset = param('offset');
    const token = req.params.token;
    // Telegram: an offset confirms every update below it; confirmed ones are never sent again.
    if (offset > 0) {
      server.storage.userMessages.forEach((u) => {
        if (u.botToken === token && u.updateId < offset) u.isRead = true;
      });
    }
    const unconfirmed = () => server.storage.userMessages
      .filter((u) => u.botToken === token && !u.isRead && u.updateId >= offset);
    const send = () => res.json({ ok: true, result: unconfirmed().map(TelegramServer.formatUpdate) });
    if (seconds <= 0 || unconfirmed().length > 0) { send(); return; }
    const events = ['AddedUserMessage', 'AddedUserCommand', 'AddedUserCallbackQuery'];
    let settled = false;
    const cleanup = () => {
      settled = true;
      clearTimeout(timer);
      events.forEach((e) => server.off(e, check));
    };
    const check = () => { if (!settled && unconfirmed().length > 0) { cleanup(); send(); } };
    const timer = setTimeout(() => { if (!settled) { cleanup(); send(); } }, seconds * 1000);
    events.forEach((e) => server.on(e, check));
    // The client went away: stop waiting (nothing is confirmed but by an offset).
    res.on('close', () => { if (!settled) cleanup(); });
  });
  outer.use(inner);
  server.webServer = outer; // start() builds the http server from this.webServer
}

let stopping = false;
function shutdown(code) {
  if (stopping) return;
  stopping = true;
  Promise.race([server.stop().catch(() => {}), new Promise((r) => setTimeout(r, 300))])
    .then(() => process.exit(code));
}

server.start().then(() => {
  process.stdout.write(`listening ${server.server.address().port}\n`);
}, (err) => {
  process.stderr.write(`failed to start: ${err && err.message ? err.message : err}\n`);
  process.exit(1);
});

process.stdin.on('end', () => shutdown(0));
process.stdin.on('close', () => shutdown(0));
process.stdin.on('error', () => shutdown(0));
process.stdin.resume();
process.on('SIGTERM', () => shutdown(0));
process.on('SIGINT', () => shutdown(0));

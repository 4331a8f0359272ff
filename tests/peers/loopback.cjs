// loopback.cjs: a Node preload (`node --require loopback.cjs ...`, or NODE_OPTIONS) that
// puts every net.Server.listen() without an explicit host on 127.0.0.1 instead of all
// interfaces. The real-peer suite (tests/peers/conftest.py) starts server-everything's
// Streamable HTTP mode with it: that server listens on every interface by default, and a
// test must not open a port to the network. Standalone: Node's own `net` module only.
const net = require('net');
const orig = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const a0 = args[0];
  if (typeof a0 === 'number' || (typeof a0 === 'string' && /^\d+$/.test(a0))) {
    if (typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
  } else if (a0 && typeof a0 === 'object' && !(a0 instanceof net.Server) && a0.path === undefined && a0.fd === undefined && a0.handle === undefined && a0._handle === undefined) {
    if (!a0.host) args[0] = { ...a0, host: '127.0.0.1' };
  } else if (a0 === undefined || typeof a0 === 'function') {
    args.unshift(0, '127.0.0.1');
  }
  return orig.apply(this, args);
};

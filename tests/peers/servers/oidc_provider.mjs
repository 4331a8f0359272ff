// A real OAuth 2.1 / OpenID Connect authorization server for the peer suite, built on
// oidc-provider (npm, installed under .peers/node_modules by .ci/run). Test-only: no human
// ever logs in, and every authorization request is answered by an automatic interaction.
//
//   node tests/peers/servers/oidc_provider.mjs --port P --state-dir DIR
//        [--resource URL]... [--opaque-resource URL]... [--kid KID] [--access-ttl SECONDS]
//        [--exchange-resource URL]... [--exchange-ttl SECONDS] [--exchange-deny SUB]...
//        [--node-modules DIR]
//
// - Listens on 127.0.0.1:P only (P may be 0: the issuer then names the port it got).
//   Issuer: http://127.0.0.1:P (no trailing slash). Prints `READY <issuer>` when listening.
// - Signs with one RSA 2048 key (RS256, kid --kid, default k1), kept as PKCS#8 PEM in
//   DIR/signing-key.pem with its kid in DIR/kid: reused when --kid matches DIR/kid, replaced
//   otherwise (restart with another --kid = key rotation; JWKS then has only the new key).
// - Access tokens for a --resource are RFC 9068 JWTs (aud = the resource, sub, scope,
//   client_id, groups); for an --opaque-resource they are opaque (introspect them). Any other
//   resource is refused (invalid_target). No resource given: the first --resource.
// - Clients: svc-admin / svc-reader (client_credentials, client_secret_basic), gateway
//   (client_credentials, used to introspect), plus open dynamic registration (public
//   clients with PKCE S256 allowed).
// - Authorization code + PKCE without a human: /interaction/<uid> logs in the account named
//   by login_hint (default alice; login_hint=deny answers access_denied) and grants every
//   requested scope for the requested resource. Cookies are not needed (see cookieless()).
// - Users: alice → groups [admins], bob → [readers], anyone else → [] (any login_hint works).
// - Introspection (/token/introspection) answers for opaque tokens (oidc-provider) and for
//   this server's JWT access tokens too (verified here; oidc-provider refuses JWTs).
// - Token exchange (RFC 8693, grant_type urn:ietf:params:oauth:grant-type:token-exchange at
//   /token; oidc-provider has none built in): the client `gateway` (HTTP Basic) presents a
//   user's JWT access token from this server as subject_token (subject_token_type
//   access_token) and asks for a --exchange-resource; it gets an RS256 JWT for that resource
//   with the user's sub and groups, the requested scope, act {sub: gateway}, expiring after
//   --exchange-ttl (default 300). Subjects named by --exchange-deny get invalid_grant; any
//   other client unauthorized_client; another resource invalid_target. GET /test/exchanges
//   counts the exchanges made, by subject ({"count": n, "subjects": {sub: n}}).
// The node_modules holding oidc-provider: --node-modules, else $TOOLGATE_PEERS/node_modules,
// else <repo>/.peers/node_modules.

import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

// ---- command line ----------------------------------------------------------------------

const { values: args } = parseArgs({
  options: {
    port: { type: 'string' },
    'state-dir': { type: 'string' },
    resource: { type: 'string', multiple: true, default: [] },
    'opaque-resource': { type: 'string', multiple: true, default: [] },
    kid: { type: 'string', default: 'k1' },
    'access-ttl': { type: 'string', default: '300' },
    'exchange-resource': { type: 'string', multiple: true, default: [] },
    'exchange-ttl': { type: 'string', default: '300' },
    'exchange-deny': { type: 'string', multiple: true, default: [] },
    'node-modules': { type: 'string' },
  },
});
if (args.port === undefined || !args['state-dir']) {
  console.error('usage: oidc_provider.mjs --port P --state-dir DIR [--resource URL]... [--kid KID] [--access-ttl S]');
  process.exit(2);
}
const ACCESS_TTL = Number.parseInt(args['access-ttl'], 10);
const JWT_RESOURCES = args.resource;
const OPAQUE_RESOURCES = args['opaque-resource'];
const RESOURCES = [...JWT_RESOURCES, ...OPAQUE_RESOURCES];

// The scopes every resource offers, also declared as provider scopes so that a dynamically
// registered client may carry them in its `scope` metadata (oidc-provider rejects others).
const RESOURCE_SCOPES = ['mcp', 'tools:read', 'tools:write', 'admin'];
const USER_GROUPS = { alice: ['admins'], bob: ['readers'] };
const CLIENT_GROUPS = { 'svc-admin': ['admins'], 'svc-reader': [] };

// ---- oidc-provider's dev chatter -----------------------------------------------------------
// Notices go to console.info (our stdout); the runtime check warns on Node 20. Errors stay.

const DROP = [/^oidc-provider NOTICE/, /Unsupported runtime/, /already parsed request body/];
for (const level of ['info', 'warn']) {
  console[level] = (...a) => { if (!DROP.some((re) => re.test(String(a[0])))) console.error(...a); };
}

const here = path.dirname(fileURLToPath(import.meta.url));
const nodeModules = args['node-modules']
  || (process.env.TOOLGATE_PEERS && path.join(path.resolve(process.env.TOOLGATE_PEERS), 'node_modules'))
  || path.resolve(here, '../../../.peers/node_modules');
const requireFrom = createRequire(path.join(nodeModules, 'noop.js'));
const load = (name) => import(pathToFileURL(requireFrom.resolve(name)).href);
const { default: Provider, errors } = await load('oidc-provider');
const { createMemoryAdapter } = await import(
  pathToFileURL(path.join(path.dirname(requireFrom.resolve('oidc-provider')), 'adapters/memory_adapter.js')).href);
const jose = await load('jose');

// ---- signing key: DIR/signing-key.pem + DIR/kid ---------------------------------------------

function signingKey(dir, kid) {
  fs.mkdirSync(dir, { recursive: true });
  const pemFile = path.join(dir, 'signing-key.pem');
  const kidFile = path.join(dir, 'kid');
  let key;
  if (fs.existsSync(pemFile) && fs.existsSync(kidFile) && fs.readFileSync(kidFile, 'utf8').trim() === kid) {
    key = crypto.createPrivateKey(fs.readFileSync(pemFile));
  } else {
    key = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    // Written beside and renamed, so a reader never sees half a key.
    fs.writeFileSync(`${pemFile}.tmp`, key.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    fs.renameSync(`${pemFile}.tmp`, pemFile);
    fs.writeFileSync(`${kidFile}.tmp`, `${kid}\n`);
    fs.renameSync(`${kidFile}.tmp`, kidFile);
  }
  return key;
}
const privateKey = signingKey(args['state-dir'], args.kid);
const publicKey = crypto.createPublicKey(privateKey);

// ---- listen first (port 0 works), then build the provider for the issuer we got --------------

let handler = (_req, res) => { res.statusCode = 503; res.end(); };
const server = http.createServer((req, res) => handler(req, res));
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(Number.parseInt(args.port, 10), '127.0.0.1', resolve);
});
const ISSUER = `http://127.0.0.1:${server.address().port}`;

const resourceServer = (resource) => ({
  scope: RESOURCE_SCOPES.join(' '),
  audience: resource,
  accessTokenTTL: ACCESS_TTL,
  accessTokenFormat: OPAQUE_RESOURCES.includes(resource) ? 'opaque' : 'jwt',
  ...(OPAQUE_RESOURCES.includes(resource) ? {} : { jwt: { sign: { alg: 'RS256' } } }),
});

const provider = new Provider(ISSUER, {
  adapter: createMemoryAdapter(15), // the same in-memory store, minus the dev warning
  jwks: { keys: [{ ...privateKey.export({ format: 'jwk' }), kid: args.kid, alg: 'RS256', use: 'sig' }] },
  clients: [
    ...['svc-admin', 'svc-reader', 'gateway'].map((id) => ({
      client_id: id,
      client_secret: `${id}-secret`,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    })),
  ],
  scopes: ['openid', 'offline_access', ...RESOURCE_SCOPES],
  claims: { openid: ['sub', 'groups'] },
  responseTypes: ['code'],
  pkce: { required: () => true }, // S256 is the only method oidc-provider 9 supports
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true, allowedPolicy: introspectionAllowed },
    revocation: { enabled: true, allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId },
    registration: { enabled: true, initialAccessToken: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (_ctx, _client, oneOf) => (oneOf ? oneOf[0] : RESOURCES[0]),
      useGrantedResource: async () => true, // token requests without `resource` get the granted one
      getResourceServerInfo: async (_ctx, resource) => {
        if (RESOURCES.includes(resource)) return resourceServer(resource);
        throw new errors.InvalidTarget(`unknown resource ${resource}`);
      },
    },
  },
  findAccount: async (_ctx, sub) => ({
    accountId: sub,
    claims: async () => ({ sub, groups: USER_GROUPS[sub] ?? [] }),
  }),
  extraTokenClaims: async (_ctx, token) => ({
    groups: token.accountId ? (USER_GROUPS[token.accountId] ?? []) : (CLIENT_GROUPS[token.clientId] ?? []),
  }),
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  expiresWithSession: async () => false,
  rotateRefreshToken: () => true,
  clientBasedCORS: () => true,
  interactions: { url: async (_ctx, interaction) => `/interaction/${interaction.uid}` },
  // Functions that never call oidc-provider's "you SHOULD change this" defaults.
  ttl: {
    AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL || ACCESS_TTL,
    ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL || ACCESS_TTL,
    AuthorizationCode: () => 60,
    IdToken: () => 3600,
    RefreshToken: () => 24 * 3600,
    Interaction: () => 600,
    Session: () => 24 * 3600,
    Grant: () => 24 * 3600,
    DeviceCode: () => 600,
    BackchannelAuthenticationRequest: () => 600,
    PreAuthorizedCode: () => 600,
  },
});

// Confidential clients may introspect anything; a public client only its own tokens.
async function introspectionAllowed(ctx, client, token) {
  return client.clientAuthMethod !== 'none' || token.clientId === client.clientId;
}

// ---- middleware (provider.use runs before oidc-provider's own routes) -----------------------

// Each authorization request starts a fresh login, with or without a cookie jar: the client's
// cookies are dropped on /auth, and the interaction and resume steps get exactly the cookie
// they need (their uid is in the path). So login_hint always decides the account, and a
// plain redirect follower works. (oidc-provider signs no cookies: cookies.keys is empty.)
provider.use(async (ctx, next) => {
  const m = /^\/(auth|interaction)(?:\/([\w-]+))?$/.exec(ctx.path);
  if (m) {
    const [, kind, uid] = m;
    if (!uid) delete ctx.req.headers.cookie;
    else ctx.req.headers.cookie = `${provider.cookieName(kind === 'auth' ? 'resume' : 'interaction')}=${uid}`;
  }
  await next();
});

// RFC 8414 metadata: the same document as OpenID discovery.
provider.use(async (ctx, next) => {
  if (ctx.path === '/.well-known/oauth-authorization-server') ctx.path = '/.well-known/openid-configuration';
  await next();
});

// The automatic interaction: log in, grant everything requested, return to /auth/<uid>.
provider.use(async (ctx, next) => {
  if (ctx.method !== 'GET' || !/^\/interaction\/[\w-]+$/.test(ctx.path)) return next();
  const { params } = await provider.interactionDetails(ctx.req, ctx.res);
  const accountId = params.login_hint || 'alice';
  let result;
  if (accountId === 'deny') {
    result = { error: 'access_denied', error_description: 'login_hint=deny' };
  } else {
    const requested = (params.scope || '').split(' ').filter(Boolean);
    const grant = new provider.Grant({ accountId, clientId: params.client_id });
    const oidcScopes = requested.filter((s) => ['openid', 'offline_access', ...RESOURCE_SCOPES].includes(s));
    if (oidcScopes.length) grant.addOIDCScope(oidcScopes.join(' '));
    const resources = [].concat(params.resource ?? RESOURCES[0] ?? []).filter((r) => RESOURCES.includes(r));
    const resourceScopes = requested.filter((s) => RESOURCE_SCOPES.includes(s));
    for (const r of resources) if (resourceScopes.length) grant.addResourceScope(r, resourceScopes.join(' '));
    result = { login: { accountId }, consent: { grantId: await grant.save() } };
  }
  ctx.respond = false; // interactionFinished writes the 303 itself
  await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: false });
});

// Introspection of our own JWT access tokens (oidc-provider answers unsupported_token_type):
// the caller authenticates as a confidential client (basic or post), the token is verified
// with our key (signature, iss, exp/nbf). Anything else goes on to oidc-provider.
provider.use(async (ctx, next) => {
  if (ctx.method !== 'POST' || ctx.path !== '/token/introspection' || !ctx.is('application/x-www-form-urlencoded')) return next();
  const raw = await new Promise((resolve, reject) => {
    const chunks = [];
    ctx.req.on('data', (c) => chunks.push(c)).on('end', () => resolve(Buffer.concat(chunks))).on('error', reject);
  });
  const form = new URLSearchParams(raw.toString());
  const token = form.get('token') || '';
  if (token.split('.').length !== 3) {
    ctx.req.body = raw; // oidc-provider reads an already-read body from req.body
    return next();
  }
  let [id, secret] = [form.get('client_id'), form.get('client_secret')];
  const basic = /^Basic (.+)$/i.exec(ctx.get('authorization'));
  if (basic) {
    [id, secret] = Buffer.from(basic[1], 'base64').toString().split(':').map(decodeURIComponent);
  }
  const client = id && await provider.Client.find(id);
  if (!client || !client.clientSecret || !secret
      || !crypto.timingSafeEqual(crypto.createHash('sha256').update(secret).digest(),
        crypto.createHash('sha256').update(client.clientSecret).digest())) {
    ctx.status = 401;
    ctx.body = { error: 'invalid_client', error_description: 'client authentication failed' };
    return;
  }
  ctx.set('Cache-Control', 'no-store');
  try {
    const { payload } = await jose.jwtVerify(token, publicKey, { issuer: ISSUER, algorithms: ['RS256'], typ: 'at+jwt' });
    ctx.body = { ...payload, active: true, token_type: 'Bearer' };
  } catch {
    ctx.body = { active: false };
  }
});

// Token exchange (RFC 8693), for the client `gateway` only; see the header.
const EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const EXCHANGE_TTL = Number.parseInt(args['exchange-ttl'], 10);
const exchanges = { count: 0, subjects: {} };
provider.use(async (ctx, next) => {
  if (ctx.method === 'GET' && ctx.path === '/test/exchanges') {
    ctx.body = exchanges;
    return;
  }
  if (ctx.method !== 'POST' || ctx.path !== '/token' || !ctx.is('application/x-www-form-urlencoded')) return next();
  const raw = await new Promise((resolve, reject) => {
    const chunks = [];
    ctx.req.on('data', (c) => chunks.push(c)).on('end', () => resolve(Buffer.concat(chunks))).on('error', reject);
  });
  const form = new URLSearchParams(raw.toString());
  if (form.get('grant_type') !== EXCHANGE_GRANT) {
    ctx.req.body = raw; // oidc-provider reads an already-read body from req.body
    return next();
  }
  ctx.set('Cache-Control', 'no-store');
  const refuse = (status, error, description) => {
    console.error(`oidc_provider: token exchange refused: ${error} ${description}`);
    ctx.status = status;
    ctx.body = { error, error_description: description };
  };
  const basic = /^Basic (.+)$/i.exec(ctx.get('authorization'));
  const [id, secret] = basic ? Buffer.from(basic[1], 'base64').toString().split(':').map(decodeURIComponent) : [];
  const client = id && await provider.Client.find(id);
  if (!client || !client.clientSecret || !secret
      || !crypto.timingSafeEqual(crypto.createHash('sha256').update(secret).digest(),
        crypto.createHash('sha256').update(client.clientSecret).digest())) {
    return refuse(401, 'invalid_client', 'client authentication failed');
  }
  if (client.clientId !== 'gateway') return refuse(400, 'unauthorized_client', `${client.clientId} may not exchange tokens`);
  if (form.get('subject_token_type') !== ACCESS_TOKEN_TYPE) return refuse(400, 'invalid_request', 'subject_token_type must be an access token');
  const resource = form.get('resource');
  if (!args['exchange-resource'].includes(resource)) return refuse(400, 'invalid_target', `no exchange for resource ${resource}`);
  let subject;
  try {
    ({ payload: subject } = await jose.jwtVerify(form.get('subject_token') || '', publicKey, { issuer: ISSUER, algorithms: ['RS256'], typ: 'at+jwt' }));
  } catch (e) {
    return refuse(400, 'invalid_grant', `the subject_token is not valid (${e.code || e.message})`);
  }
  if (!subject.sub || subject.aud === resource) return refuse(400, 'invalid_grant', 'the subject_token is not a user token for another resource');
  if (args['exchange-deny'].includes(subject.sub)) return refuse(400, 'invalid_grant', `${subject.sub} may not be represented at ${resource}`);
  const now = Math.floor(Date.now() / 1000);
  const scope = form.get('scope') || subject.scope;
  const token = await new jose.SignJWT({
    client_id: client.clientId, ...(scope ? { scope } : {}), groups: USER_GROUPS[subject.sub] ?? [], act: { sub: client.clientId },
  })
    .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: args.kid })
    .setIssuer(ISSUER).setSubject(subject.sub).setAudience(resource)
    .setIssuedAt(now).setExpirationTime(now + EXCHANGE_TTL).setJti(crypto.randomUUID())
    .sign(privateKey);
  exchanges.count += 1;
  exchanges.subjects[subject.sub] = (exchanges.subjects[subject.sub] ?? 0) + 1;
  ctx.body = { access_token: token, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer', expires_in: EXCHANGE_TTL, ...(scope ? { scope } : {}) };
});

// Why a request was refused goes to stderr (the test's log).
for (const event of ['server_error', 'authorization.error', 'grant.error', 'registration_create.error',
  'introspection.error', 'revocation.error', 'discovery.error', 'jwks.error', 'resume.error']) {
  provider.on(event, (ctx, err) => console.error(`oidc_provider: ${event}: ${err?.error ?? ''} ${err?.error_description ?? err?.message ?? err}`));
}

handler = provider.callback();
process.stdout.write(`READY ${ISSUER}\n`);

// ---- shutdown --------------------------------------------------------------------------------

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 2000).unref();
  });
}

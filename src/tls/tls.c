/* tls.c: one TLS connection per process (tls.h), client or server, BearSSL's engine API over
 * a non-blocking socket. The engine is a state machine with four buffers (records out, records
 * in, data out, data in); this file only moves bytes between those and the socket, so the
 * caller's poll() loop decides when. */
#include "tls/tls.h"

#include <bearssl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"

/* A CA certificate's DN and key, copied out of the bundle. ca-certificates has ~140 roots of
 * ~100 DN bytes and at most a 4096-bit RSA key each (~600 bytes): this holds 256 large ones. */
#define ARENA_BYTES (256u * 1024u)
/* One certificate's DER; a root above this is skipped. */
#define DER_BYTES (16u * 1024u)
#define DN_BYTES 4096u

static br_x509_trust_anchor anchors[TLS_ANCHORS_MAX];
static size_t nanchors;
static unsigned char arena[ARENA_BYTES];
static size_t arena_used;

/* a client's or a server's context: both begin with the engine, which the rest drives */
static union {
	br_ssl_client_context c;
	br_ssl_server_context s;
} tc;
#define ENG (&tc.c.eng)
static br_x509_minimal_context xc;
static unsigned char iobuf[BR_SSL_BUFSIZE_BIDI];
static int tls_fd = -1;
static bool sock_eof;           /* the peer closed its side of TCP */
static const char *err_word = "none";
static int err_code;

static void fail(const char *word, int code)
{
	err_word = word;
	err_code = code;
}

/* ---- trust anchors ---- */

struct bytes {
	unsigned char *p;
	size_t len, cap;
	bool over;
};

static void bytes_append(void *ctx, const void *data, size_t len)
{
	struct bytes *b = ctx;

	if (b->over || len > b->cap - b->len) {
		b->over = true;
		return;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

static unsigned char *arena_copy(const void *p, size_t len)
{
	unsigned char *d;

	if (len > ARENA_BYTES - arena_used)
		return NULL;
	d = arena + arena_used;
	memcpy(d, p, len);
	arena_used += len;
	return d;
}

/* Turns one certificate into an anchor: false (and nothing kept) when it does not decode, has a
 * key BearSSL cannot use, or the tables are full. */
static bool add_anchor(const unsigned char *der, size_t len)
{
	static unsigned char dnbuf[DN_BYTES];
	struct bytes dn = { dnbuf, 0, sizeof(dnbuf), false };
	br_x509_decoder_context dc;
	br_x509_trust_anchor *ta;
	const br_x509_pkey *pk;
	size_t mark = arena_used;

	if (nanchors == TLS_ANCHORS_MAX)
		return false;
	br_x509_decoder_init(&dc, bytes_append, &dn);
	br_x509_decoder_push(&dc, der, len);
	pk = br_x509_decoder_get_pkey(&dc);
	if (!pk || dn.over || br_x509_decoder_last_error(&dc) != 0)
		return false;
	ta = &anchors[nanchors];
	memset(ta, 0, sizeof(*ta));
	ta->flags = br_x509_decoder_isCA(&dc) ? BR_X509_TA_CA : 0;
	if (!(ta->dn.data = arena_copy(dn.p, dn.len)))
		goto full;
	ta->dn.len = dn.len;
	ta->pkey.key_type = pk->key_type;
	switch (pk->key_type) {
	case BR_KEYTYPE_RSA:
		ta->pkey.key.rsa.nlen = pk->key.rsa.nlen;
		ta->pkey.key.rsa.elen = pk->key.rsa.elen;
		if (!(ta->pkey.key.rsa.n = arena_copy(pk->key.rsa.n, pk->key.rsa.nlen)) ||
		    !(ta->pkey.key.rsa.e = arena_copy(pk->key.rsa.e, pk->key.rsa.elen)))
			goto full;
		break;
	case BR_KEYTYPE_EC:
		ta->pkey.key.ec.curve = pk->key.ec.curve;
		ta->pkey.key.ec.qlen = pk->key.ec.qlen;
		if (!(ta->pkey.key.ec.q = arena_copy(pk->key.ec.q, pk->key.ec.qlen)))
			goto full;
		break;
	default:
		return false;
	}
	nanchors++;
	return true;
full:
	arena_used = mark;
	return false;
}

/* Calls each(name, der, len) for every PEM object of the file at path whose DER fits in
 * DER_BYTES (a larger one is skipped): 0, or -errno when the file cannot be read (word says
 * which file, for the log). The DER buffer is wiped afterwards: it may have held a key. */
static int pem_each(const char *path, const char *word,
		    void (*each)(const char *name, const unsigned char *der, size_t len))
{
	static unsigned char der[DER_BYTES];
	struct bytes obj = { der, 0, sizeof(der), false };
	char name[32] = "";
	br_pem_decoder_context pc;
	unsigned char buf[4096];
	bool in_obj = false, at_end = false;
	int fd, e = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fail(word, 0);
		return -errno;
	}
	br_pem_decoder_init(&pc);
	while (!at_end) {
		ssize_t n = read(fd, buf, sizeof(buf));
		const unsigned char *p = buf;
		size_t left;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			e = -errno;
			fail(word, 0);
			break;
		}
		if (n == 0) {
			/* A bundle whose last line has no newline still ends its object. */
			buf[0] = '\n';
			n = 1;
			at_end = true;
		}
		left = (size_t)n;
		while (left > 0) {
			size_t used = br_pem_decoder_push(&pc, p, left);

			p += used;
			left -= used;
			switch (br_pem_decoder_event(&pc)) {
			case BR_PEM_BEGIN_OBJ:
				in_obj = strlen(br_pem_decoder_name(&pc)) < sizeof(name);
				if (in_obj)
					strcpy(name, br_pem_decoder_name(&pc));
				obj.len = 0;
				obj.over = false;
				br_pem_decoder_setdest(&pc, in_obj ? bytes_append : NULL,
						       in_obj ? &obj : NULL);
				break;
			case BR_PEM_END_OBJ:
				if (in_obj && !obj.over)
					each(name, der, obj.len);
				in_obj = false;
				break;
			case BR_PEM_ERROR:
				/* Garbage between objects: start over at the next BEGIN line. */
				br_pem_decoder_init(&pc);
				in_obj = false;
				break;
			default:
				break;
			}
		}
	}
	close(fd);
	explicit_bzero(der, sizeof(der));
	explicit_bzero(buf, sizeof(buf));
	explicit_bzero(&pc, sizeof(pc)); /* its own buffer held the last bytes decoded */
	return e;
}

static bool is_cert(const char *name)
{
	return strcmp(name, "CERTIFICATE") == 0 || strcmp(name, "X509 CERTIFICATE") == 0;
}

static void anchor_each(const char *name, const unsigned char *der, size_t len)
{
	if (is_cert(name))
		(void)add_anchor(der, len);
}

int tls_load_anchors(const char *path)
{
	int r;

	nanchors = 0;
	arena_used = 0;
	r = pem_each(path, "ca_file_unreadable", anchor_each);
	if (r < 0)
		return r;
	if (nanchors == 0) {
		fail("no_trust_anchors", 0);
		return ERR_PARSE;
	}
	return (int)nanchors;
}

/* ---- the client's own identity (a certificate chain and its key) ---- */

static br_x509_certificate chain[TLS_CHAIN_MAX];
static size_t nchain;
static unsigned char chain_der[TLS_CHAIN_BYTES];
static size_t chain_used;
static br_skey_decoder_context skey; /* the key, decoded; wiped by tls_forget_client */
static bool have_key;

static void chain_each(const char *name, const unsigned char *der, size_t len)
{
	if (!is_cert(name) || nchain == TLS_CHAIN_MAX || len > sizeof(chain_der) - chain_used)
		return;
	memcpy(chain_der + chain_used, der, len);
	chain[nchain].data = chain_der + chain_used;
	chain[nchain].data_len = len;
	chain_used += len;
	nchain++;
}

static const char *key_fault; /* why no key was taken, for the error word */

static void key_each(const char *name, const unsigned char *der, size_t len)
{
	if (have_key)
		return;
	if (strcmp(name, "RSA PRIVATE KEY") == 0) {
		key_fault = "rsa_key_unsupported";
		return;
	}
	if (strcmp(name, "EC PRIVATE KEY") != 0 && strcmp(name, "PRIVATE KEY") != 0)
		return;
	br_skey_decoder_init(&skey);
	br_skey_decoder_push(&skey, der, len);
	if (br_skey_decoder_last_error(&skey) != 0)
		key_fault = "key_malformed";
	else if (br_skey_decoder_key_type(&skey) != BR_KEYTYPE_EC)
		key_fault = "rsa_key_unsupported";
	else
		have_key = true;
	if (!have_key)
		explicit_bzero(&skey, sizeof(skey));
}

int tls_load_client(const char *cert_path, const char *key_path)
{
	int r;

	tls_forget_client();
	r = pem_each(cert_path, "cert_file_unreadable", chain_each);
	if (r < 0)
		return r;
	if (nchain == 0) {
		fail("no_client_certificate", 0);
		return ERR_PARSE;
	}
	key_fault = "no_client_key";
	r = pem_each(key_path, "key_file_unreadable", key_each);
	if (r < 0 || !have_key) {
		if (r == 0)
			fail(key_fault, 0);
		tls_forget_client();
		return r < 0 ? r : ERR_PARSE;
	}
	return 0;
}

void tls_forget_client(void)
{
	explicit_bzero(&skey, sizeof(skey));
	explicit_bzero(chain_der, sizeof(chain_der));
	nchain = 0;
	chain_used = 0;
	have_key = false;
}

static const char *alpn[1]; /* the one protocol offered, or none */

void tls_alpn_set(const char *proto)
{
	alpn[0] = proto;
}

const char *tls_alpn_agreed(void)
{
	return br_ssl_engine_get_selected_protocol(ENG);
}

/* Hands the chain and key to the engine for a server that asks for a certificate. */
static void client_identity_set(void)
{
	if (have_key)
		br_ssl_client_set_single_ec(&tc.c, chain, nchain, br_skey_decoder_get_ec(&skey),
					    BR_KEYTYPE_SIGN, BR_KEYTYPE_EC, br_ec_get_default(),
					    br_ecdsa_sign_asn1_get_default());
}

/* ---- the engine's profile ---- */

/* TLS 1.2 with ECDHE and an AEAD only: forward secrecy and no CBC, CCM, 3DES, static RSA or
 * TLS 1.0 PRF, which every upstream a credential goes to (and etcd, and the fleet's nodes)
 * does without. Leaving them out of BearSSL's full profile keeps their code out of the binary. */
static const uint16_t client_suites[] = {
	BR_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	BR_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	BR_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	BR_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	BR_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	BR_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
};
/* a fleet node serves with its EC key */
static const uint16_t server_suites[] = {
	BR_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	BR_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	BR_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
};

/* The engine's algorithms, the certificate checker's (against the anchors), the buffer, a
 * seed and the ALPN offer, for either side. */
static void engine_setup(const uint16_t *suites, size_t n)
{
	static const br_hash_class *const hashes[] = {
		&br_sha1_vtable, &br_sha224_vtable, &br_sha256_vtable, &br_sha384_vtable,
		&br_sha512_vtable,
	};
	unsigned char seed[32];

	br_ssl_engine_set_versions(ENG, BR_TLS12, BR_TLS12);
	br_ssl_engine_set_suites(ENG, suites, n);
	br_ssl_engine_set_default_rsavrfy(ENG);
	br_ssl_engine_set_default_ecdsa(ENG);
	br_x509_minimal_init(&xc, &br_sha256_vtable, anchors, nanchors);
	br_x509_minimal_set_rsa(&xc, br_ssl_engine_get_rsavrfy(ENG));
	br_x509_minimal_set_ecdsa(&xc, br_ssl_engine_get_ec(ENG), br_ssl_engine_get_ecdsa(ENG));
	for (int id = br_sha1_ID; id <= br_sha512_ID; id++) {
		br_ssl_engine_set_hash(ENG, id, hashes[id - br_sha1_ID]);
		br_x509_minimal_set_hash(&xc, id, hashes[id - br_sha1_ID]);
	}
	br_ssl_engine_set_x509(ENG, &xc.vtable);
	br_ssl_engine_set_prf_sha256(ENG, &br_tls12_sha256_prf);
	br_ssl_engine_set_prf_sha384(ENG, &br_tls12_sha384_prf);
	br_ssl_engine_set_default_aes_gcm(ENG);
	br_ssl_engine_set_default_chapol(ENG);
	br_ssl_engine_set_buffer(ENG, iobuf, sizeof(iobuf), 1);
	/* BearSSL seeds itself from the system too; this makes sure a seed is there even where its
	 * own probe finds no source. */
	if (getrandom(seed, sizeof(seed), 0) == (ssize_t)sizeof(seed))
		br_ssl_engine_inject_entropy(ENG, seed, sizeof(seed));
	explicit_bzero(seed, sizeof(seed));
	if (alpn[0])
		br_ssl_engine_set_protocol_names(ENG, alpn, 1);
}

/* ---- the connection ---- */

static const struct {
	int code;
	const char *word;
} words[] = {
	{ BR_ERR_X509_NOT_TRUSTED, "unknown_ca" },
	{ BR_ERR_X509_BAD_SERVER_NAME, "name_mismatch" },
	{ BR_ERR_X509_EXPIRED, "certificate_expired" },
	{ BR_ERR_X509_TIME_UNKNOWN, "certificate_time_unknown" },
	{ BR_ERR_X509_BAD_SIGNATURE, "certificate_bad_signature" },
	{ BR_ERR_X509_NOT_CA, "certificate_not_ca" },
	{ BR_ERR_X509_FORBIDDEN_KEY_USAGE, "certificate_key_usage" },
	{ BR_ERR_X509_WEAK_PUBLIC_KEY, "certificate_weak_key" },
	{ BR_ERR_X509_EMPTY_CHAIN, "certificate_missing" },
	{ BR_ERR_NO_CLIENT_AUTH, "certificate_missing" },
	{ BR_ERR_X509_CRITICAL_EXTENSION, "certificate_critical_extension" },
	{ BR_ERR_X509_UNSUPPORTED, "certificate_unsupported" },
	{ BR_ERR_UNSUPPORTED_VERSION, "protocol_version" },
	{ BR_ERR_BAD_VERSION, "protocol_version" },
	{ BR_ERR_BAD_CIPHER_SUITE, "no_shared_cipher" },
	{ BR_ERR_BAD_SIGNATURE, "bad_signature" },
	{ BR_ERR_BAD_MAC, "bad_record_mac" },
	{ BR_ERR_NO_RANDOM, "no_random" },
	{ BR_ERR_IO, "io_error" },
};

static void engine_failed(void)
{
	int code = br_ssl_engine_last_error(ENG);
	const char *w = "handshake_failed";

	if (code >= BR_ERR_SEND_FATAL_ALERT)
		w = "alert_sent";
	else if (code >= BR_ERR_RECV_FATAL_ALERT)
		w = "alert_received";
	else if (code >= BR_ERR_X509_OK)
		w = "certificate_invalid";
	for (size_t i = 0; i < ARRAY_LEN(words); i++)
		if (words[i].code == code)
			w = words[i].word;
	fail(w, code);
}

short tls_want_events(void)
{
	unsigned st = br_ssl_engine_current_state(ENG);
	short ev = 0;

	if (st & BR_SSL_CLOSED)
		return 0;
	if (st & BR_SSL_SENDREC)
		ev |= POLLOUT;
	if ((st & BR_SSL_RECVREC) && !sock_eof)
		ev |= POLLIN;
	return ev;
}

int tls_pump(short revents)
{
	/* Readiness is a hint: each buffer the engine offers is tried, EAGAIN is no error. */
	(void)revents;
	for (;;) {
		unsigned st = br_ssl_engine_current_state(ENG);
		bool moved = false;

		if (st & BR_SSL_CLOSED) {
			if (br_ssl_engine_last_error(ENG) != BR_ERR_OK) {
				engine_failed();
				return -1;
			}
			return 0;
		}
		if (st & BR_SSL_SENDREC) {
			size_t len;
			unsigned char *b = br_ssl_engine_sendrec_buf(ENG, &len);
			ssize_t n = send(tls_fd, b, len, MSG_NOSIGNAL);

			if (n > 0) {
				br_ssl_engine_sendrec_ack(ENG, (size_t)n);
				moved = true;
			} else if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
				/* The peer closed before it read all we had (after an early 413,
				 * say): what it will never read is dropped, so that what it
				 * answered still reaches the reader, who then sees the end. */
				br_ssl_engine_sendrec_ack(ENG, len);
				moved = true;
			} else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
				   errno != EINTR) {
				fail("io_error", 0);
				return -1;
			}
		}
		if ((st & BR_SSL_RECVREC) && !sock_eof) {
			size_t len;
			unsigned char *b = br_ssl_engine_recvrec_buf(ENG, &len);
			ssize_t n = recv(tls_fd, b, len, 0);

			if (n > 0) {
				br_ssl_engine_recvrec_ack(ENG, (size_t)n);
				moved = true;
			} else if (n == 0) {
				sock_eof = true;
			} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
				/* A reset after the peer's last byte still ends the stream for the
				 * reader: recv reports what the engine holds, then the end. */
				if (errno == ECONNRESET) {
					sock_eof = true;
				} else {
					fail("io_error", 0);
					return -1;
				}
			}
		}
		if (!moved)
			return 0;
	}
}

/* Takes fd for the connection (non-blocking) and resets the error: false when it cannot. */
static bool conn_begin(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	err_word = "none";
	err_code = 0;
	sock_eof = false;
	tls_fd = fd;
	if (nanchors == 0) {
		fail("no_trust_anchors", 0);
		return false;
	}
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		fail("io_error", 0);
		return false;
	}
	return true;
}

/* Runs the handshake the engine was reset for until it is done, polling until deadline. */
static int handshake_run(int64_t deadline)
{
	for (;;) {
		unsigned st = br_ssl_engine_current_state(ENG);
		struct pollfd p = { .fd = tls_fd };
		int64_t left;
		int n;

		if (st & BR_SSL_CLOSED) {
			engine_failed();
			return -1;
		}
		if (st & (BR_SSL_SENDAPP | BR_SSL_RECVAPP))
			return 0;
		if (sock_eof) {
			fail("closed_in_handshake", 0);
			return -1;
		}
		left = deadline - clock_mono_ms();
		if (left <= 0) {
			fail("timeout", 0);
			return -1;
		}
		p.events = tls_want_events();
		n = poll(&p, 1, (int)left);
		if (n < 0 && errno != EINTR) {
			fail("io_error", 0);
			return -1;
		}
		if (n > 0 && tls_pump(p.revents) < 0)
			return -1;
	}
}

static const unsigned char cn_oid[] = { 3, 0x55, 0x04, 0x03 }; /* id-at-commonName */

/* The client's handshake: with name, SNI and the certificate's name check (BearSSL's: its
 * subjectAltName, else its CN); with cn instead, no SNI and the certificate's common name must
 * be cn exactly. */
static int client_handshake(int fd, const char *name, const char *cn, int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;
	char got[64] = "";
	br_name_element e = { .oid = cn_oid, .buf = got, .len = sizeof(got) };

	if (!conn_begin(fd))
		return -1;
	/* BearSSL checks no name at all for a NULL or empty one: never what a route wants. */
	if (!(name && name[0]) && !(cn && cn[0])) {
		fail("no_server_name", 0);
		return -1;
	}
	br_ssl_client_zero(&tc.c);
	engine_setup(client_suites, ARRAY_LEN(client_suites));
	client_identity_set();
	if (cn)
		br_x509_minimal_set_name_elements(&xc, &e, 1);
	if (!br_ssl_client_reset(&tc.c, cn ? NULL : name, 0)) {
		engine_failed();
		return -1;
	}
	if (handshake_run(deadline) < 0)
		return -1;
	if (cn && (e.status != 1 || strcmp(got, cn) != 0)) {
		fail("name_mismatch", 0);
		return -1;
	}
	return 0;
}

int tls_handshake(int fd, const char *name, int timeout_ms)
{
	return client_handshake(fd, name, NULL, timeout_ms);
}

int tls_handshake_cn(int fd, const char *cn, int timeout_ms)
{
	return client_handshake(fd, NULL, cn, timeout_ms);
}

int tls_accept(int fd, int timeout_ms, char *peer, size_t cap)
{
	br_name_element cn = { .oid = cn_oid, .buf = peer, .len = cap };
	int64_t deadline = clock_mono_ms() + timeout_ms;

	if (!conn_begin(fd))
		return -1;
	if (!have_key || cap == 0) {
		fail("no_server_key", 0);
		return -1;
	}
	peer[0] = '\0';
	br_ssl_server_zero(&tc.s);
	engine_setup(server_suites, ARRAY_LEN(server_suites));
	br_ssl_server_set_single_ec(&tc.s, chain, nchain, br_skey_decoder_get_ec(&skey),
				    BR_KEYTYPE_SIGN, BR_KEYTYPE_EC, br_ec_get_default(),
				    br_ecdsa_sign_asn1_get_default());
	/* naming the anchors asks for the client's certificate, and BearSSL then refuses a
	 * client without one (BR_ERR_NO_CLIENT_AUTH) or with one they did not sign */
	br_ssl_server_set_trust_anchor_names_alt(&tc.s, anchors, nanchors);
	br_x509_minimal_set_name_elements(&xc, &cn, 1);
	if (!br_ssl_server_reset(&tc.s)) {
		engine_failed();
		return -1;
	}
	if (handshake_run(deadline) < 0)
		return -1;
	if (cn.status != 1 || !peer[0]) {
		fail("certificate_no_name", 0);
		return -1;
	}
	return 0;
}

size_t tls_send(const void *buf, size_t len)
{
	unsigned char *b;
	size_t room;

	if (!(br_ssl_engine_current_state(ENG) & BR_SSL_SENDAPP))
		return 0;
	b = br_ssl_engine_sendapp_buf(ENG, &room);
	if (len > room)
		len = room;
	memcpy(b, buf, len);
	br_ssl_engine_sendapp_ack(ENG, len);
	return len;
}

void tls_flush(void)
{
	br_ssl_engine_flush(ENG, 0);
}

long tls_recv(void *buf, size_t cap)
{
	unsigned st = br_ssl_engine_current_state(ENG);

	if (cap == 0)
		return TLS_AGAIN; /* 0 would read as the end */
	if (st & BR_SSL_RECVAPP) {
		size_t len;
		unsigned char *b = br_ssl_engine_recvapp_buf(ENG, &len);

		if (len > cap)
			len = cap;
		memcpy(buf, b, len);
		br_ssl_engine_recvapp_ack(ENG, len);
		return (long)len;
	}
	if (st & BR_SSL_CLOSED) {
		if (br_ssl_engine_last_error(ENG) == BR_ERR_OK)
			return 0;
		engine_failed();
		return -1;
	}
	/* The peer's TCP close without close_notify: the end of the stream for HTTP with
	 * Connection: close, which many servers end that way. */
	if (sock_eof)
		return 0;
	return TLS_AGAIN;
}

void tls_close(void)
{
	br_ssl_engine_close(ENG);
	(void)tls_pump(0);
}

void tls_wipe(void)
{
	explicit_bzero(&tc, sizeof(tc));
	explicit_bzero(&xc, sizeof(xc));
	explicit_bzero(iobuf, sizeof(iobuf));
	tls_fd = -1;
}

const char *tls_error_word(void)
{
	return err_word;
}

int tls_error_code(void)
{
	return err_code;
}

/* tls.h: a process's one TLS connection, BearSSL over a non-blocking TCP socket, driven by the
 * caller's poll() loop so that both directions move at once (a request body goes up while the
 * response streams down). The egress worker's client to an upstream (docs/EGRESS.md "What a
 * worker does", step 5), the fleet worker's to etcd, and the fleet relay's client and server
 * between nodes (docs/FLEET.md "One front door").
 *
 * TLS 1.2 only (BearSSL has no 1.3), ECDHE with AES-GCM or ChaCha20-Poly1305 only, trust
 * anchors from a PEM bundle; a client's SNI and the certificate's name are both the name it
 * dials. Each of those programs holds one connection per process, so the state (engine, I/O
 * buffer, anchors) is static storage of this file: nothing is allocated. Errors are reported as
 * a word (tls_error_word), never with certificate contents. */
#ifndef AGENTIC_TLS_H
#define AGENTIC_TLS_H

#include <stddef.h>

/* Trust anchors a bundle may give at most; certificates beyond it, or that do not decode (or
 * whose key BearSSL cannot use), are skipped. */
#define TLS_ANCHORS_MAX 256

/* Reads the PEM bundle at path into the anchor table (replacing what was there): the number of
 * anchors, or a negative errno / ERR_PARSE (no usable certificate). */
int tls_load_anchors(const char *path);

/* The client's own certificate, for a server that asks for one (the fleet's etcd and its
 * nodes): the PEM chain at cert_path (leaf first; TLS_CHAIN_MAX certificates of at most
 * TLS_CHAIN_BYTES in all) and its EC key at key_path (SEC1 "EC PRIVATE KEY" or PKCS#8 "PRIVATE
 * KEY"; an RSA key is refused: its signing code would be 3 KiB of binary no one else needs). Kept until tls_forget_client, which wipes the key; every handshake
 * after it offers them. 0, or -errno / ERR_PARSE with tls_error_word() saying which. */
#define TLS_CHAIN_MAX 4
#define TLS_CHAIN_BYTES 8192
int tls_load_client(const char *cert_path, const char *key_path);
void tls_forget_client(void);

/* The protocol every later handshake offers by ALPN ("h2": a Go server speaks HTTP/2 on TLS
 * only to a client that asks for it so); NULL: none. */
void tls_alpn_set(const char *proto);
/* The protocol the last handshake agreed by ALPN (a server takes the one it was set to when
 * the client offers it), or NULL: none. */
const char *tls_alpn_agreed(void);

/* Sets fd non-blocking and runs the handshake with name as SNI and as the name the
 * certificate must carry, polling for at most timeout_ms: 0, or -1 with tls_error_word()
 * saying why. Needs tls_load_anchors first. */
int tls_handshake(int fd, const char *name, int timeout_ms);

/* The same for a fleet node: no SNI, and the certificate's common name must be cn exactly
 * (the node's name, as etcd takes it), whatever its subjectAltName holds. */
int tls_handshake_cn(int fd, const char *cn, int timeout_ms);

/* The server's side, with the identity tls_load_client loaded (its EC key serves): the
 * handshake on fd, which must end with the client's certificate checked against the anchors
 * (a client without one is refused), polling for at most timeout_ms. 0 with the certificate's
 * common name in peer (cap bytes), or -1 with tls_error_word() saying why. */
int tls_accept(int fd, int timeout_ms, char *peer, size_t cap);

/* The poll() events the socket needs now (POLLIN, POLLOUT or both; 0 once closed). */
short tls_want_events(void);
/* Moves records between the engine and the socket after poll() reported revents: 0, or -1 when
 * the connection failed (tls_error_word). A peer that closed is seen by tls_recv. */
int tls_pump(short revents);

/* Application data. send: how many bytes the engine took (0 when its buffer is full: pump,
 * then try again); flush: makes a record of what was taken so it goes out with the next pump.
 * recv: bytes copied, 0 at the end of the stream (close_notify or the peer's TCP close),
 * TLS_AGAIN when nothing is there yet, -1 on failure. */
#define TLS_AGAIN (-2)
size_t tls_send(const void *buf, size_t len);
void tls_flush(void);
long tls_recv(void *buf, size_t cap);

/* Sends close_notify as far as the socket takes it without waiting. */
void tls_close(void);
/* Zeroes the engine and its buffers (they held the request, the injected secret with it). */
void tls_wipe(void);

/* Why the last call failed, one word for the log ("unknown_ca", "name_mismatch", "timeout",
 * ...), and BearSSL's code (0 when the failure was not the engine's). */
const char *tls_error_word(void);
int tls_error_code(void);

#endif

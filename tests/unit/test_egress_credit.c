/* test_egress_credit.c: agenticd's credit bookkeeping of an Egress call (docs/EGRESS.md "The
 * wire"): what the init may have in flight up, when the consumed count is due, how much may
 * be read from the worker for the init, the init's consumed counts checked; the per-sandbox
 * token bucket of rate_per_minute; the check of the listener an init announces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "egress/broker.h"

static void test_egress_up_window_holds_at_most_a_window(void **state)
{
	struct egress_credit c = { 0 };

	(void)state;
	assert_true(egress_credit_up_fits(&c, EGRESS_CHUNK));
	/* four chunks held, none written: the fifth would pass the window */
	c.up_in = c.up_len = 4 * EGRESS_CHUNK;
	assert_true(egress_credit_up_fits(&c, EGRESS_WINDOW - 4 * EGRESS_CHUNK));
	assert_false(egress_credit_up_fits(&c, EGRESS_WINDOW - 4 * EGRESS_CHUNK + 1));
	/* written to the worker: the window is open again, whatever was reported */
	c.up_consumed = c.up_in;
	c.up_len = 0;
	assert_true(egress_credit_up_fits(&c, EGRESS_CHUNK));
	assert_true(egress_credit_up_fits(&c, EGRESS_WINDOW));
	assert_false(egress_credit_up_fits(&c, EGRESS_WINDOW + 1));
}

static void test_egress_consumed_is_due_at_half_a_window(void **state)
{
	struct egress_credit c = { 0 };

	(void)state;
	assert_false(egress_credit_report_due(&c));
	c.up_consumed = EGRESS_WINDOW / 2 - 1;
	assert_false(egress_credit_report_due(&c));
	c.up_consumed++;
	assert_true(egress_credit_report_due(&c));
	c.up_reported = c.up_consumed;
	assert_false(egress_credit_report_due(&c));
}

static void test_egress_down_reads_keep_to_the_inits_credit(void **state)
{
	struct egress_credit c = { 0 };

	(void)state;
	assert_int_equal(egress_credit_down_room(&c), EGRESS_CHUNK);
	c.down_sent = EGRESS_WINDOW - 100;
	assert_int_equal(egress_credit_down_room(&c), 100);
	c.down_sent = EGRESS_WINDOW;
	assert_int_equal(egress_credit_down_room(&c), 0);
	/* the init's consumed: within what was sent, never backwards */
	assert_true(egress_credit_down_ack(&c, EGRESS_WINDOW / 2));
	assert_int_equal(egress_credit_down_room(&c), EGRESS_CHUNK);
	assert_true(egress_credit_down_ack(&c, EGRESS_WINDOW / 2 - 1));  /* older: nothing new */
	assert_true(egress_credit_down_ack(&c, 0));                      /* none carried */
	assert_false(egress_credit_down_ack(&c, EGRESS_WINDOW + 1));
	assert_int_equal(c.down_acked, EGRESS_WINDOW / 2);
	assert_true(egress_credit_down_ack(&c, EGRESS_WINDOW));
	assert_int_equal(egress_credit_down_room(&c), EGRESS_CHUNK);
}

/* rate_per_minute: a burst of rate, then one a minute / rate, never more than rate stored */
static void test_egress_bucket_bursts_then_refills_evenly(void **state)
{
	struct egress_bucket b = { 0 };
	int64_t t = 1000;

	(void)state;
	for (int i = 0; i < 6; i++)
		assert_true(egress_bucket_take(&b, 6, t));
	assert_false(egress_bucket_take(&b, 6, t));
	/* 6 a minute: one every 10 s */
	assert_false(egress_bucket_take(&b, 6, t + 9999));
	assert_true(egress_bucket_take(&b, 6, t + 10000));
	assert_false(egress_bucket_take(&b, 6, t + 10001));
	/* an hour idle fills it to 6, not 360 */
	t += 3600000;
	for (int i = 0; i < 6; i++)
		assert_true(egress_bucket_take(&b, 6, t));
	assert_false(egress_bucket_take(&b, 6, t));
	/* a clock that does not move (or goes back) adds nothing */
	assert_false(egress_bucket_take(&b, 6, t - 5000));
}

/* A TCP listener on 127.0.0.1 at an ephemeral port: its fd, the port in *port. */
static int loopback_listener(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* What an init announces as its proxy listener is taken only when it is one: a listening TCP
 * socket on 127.0.0.1 at the port. A connected socket of that port (an init that made it
 * one: its close could linger), another port, UDP, a Unix socket, a pipe or no descriptor
 * at all are refused. */
static void test_egress_listener_ok_takes_only_a_loopback_tcp_listener(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint16_t port, other;
	int l = loopback_listener(&port), l2 = loopback_listener(&other), c, a, u, p[2];

	(void)state;
	assert_true(egress_listener_ok(l, port));
	assert_false(egress_listener_ok(l, other));
	assert_true(egress_listener_ok(l2, other));
	sa.sin_port = htons(port);
	c = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	a = accept(l, NULL, NULL);
	assert_true(a >= 0);
	assert_false(egress_listener_ok(a, port)); /* bound to the port, not listening */
	assert_false(egress_listener_ok(c, port));
	u = socket(AF_INET, SOCK_DGRAM, 0);
	assert_false(egress_listener_ok(u, port));
	close(u);
	u = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_false(egress_listener_ok(u, port));
	assert_int_equal(pipe(p), 0);
	assert_false(egress_listener_ok(p[0], port));
	assert_false(egress_listener_ok(-1, port));
	close(p[0]);
	close(p[1]);
	close(u);
	close(a);
	close(c);
	close(l2);
	close(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_egress_listener_ok_takes_only_a_loopback_tcp_listener),
		cmocka_unit_test(test_egress_up_window_holds_at_most_a_window),
		cmocka_unit_test(test_egress_consumed_is_due_at_half_a_window),
		cmocka_unit_test(test_egress_down_reads_keep_to_the_inits_credit),
		cmocka_unit_test(test_egress_bucket_bursts_then_refills_evenly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

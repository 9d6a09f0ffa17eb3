// Minimal UCX (UCP) declarations for package net: the entry points it uses,
// loaded with dlopen from libucp.so.0 and libucs.so.0, and the parameter
// structures laid out as the UCX ABI has them since 1.10 (every structure
// starts with a field mask; fields are only ever appended). Nothing from UCX
// is needed to build.
#ifndef LC_UCX_H
#define LC_UCX_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int8_t lc_status; // ucs_status_t: 0 ok, 1 in progress, < 0 errors
#define LC_OK 0
#define LC_INPROGRESS 1
#define LC_ERR_BUSY (-15)
#define LC_ERR_CANCELED (-16)
#define LC_ERR_LAST (-100)

// Opaque handles.
typedef void *lc_h;

// ucp_params_t (80 bytes in 1.13; later fields unused here).
typedef struct {
	uint64_t field_mask;
	uint64_t features;
	size_t request_size;
	void *request_init, *request_cleanup;
	uint64_t tag_sender_mask;
	int mt_workers_shared;
	size_t estimated_num_eps;
	size_t estimated_num_ppn;
	const char *name;
	char pad[64];
} lc_ucp_params;
#define LC_PARAM_FEATURES (1u << 0)
#define LC_FEATURE_RMA (1u << 1)
#define LC_FEATURE_WAKEUP (1u << 4)
#define LC_FEATURE_AM (1u << 6)

// ucp_worker_params_t: only the thread mode is set.
typedef struct {
	uint64_t field_mask;
	int thread_mode;
	char pad[256];
} lc_worker_params;
#define LC_WORKER_THREAD_MODE (1u << 0)
#define LC_THREAD_SERIALIZED 1

// ucp_ep_params_t.
typedef void (*lc_err_cb)(void *arg, lc_h ep, lc_status status);
typedef struct {
	uint64_t field_mask;
	const void *address;
	int err_mode;
	lc_err_cb err_cb;
	void *err_arg;
	void *user_data;
	unsigned flags;
	char pad[128];
} lc_ep_params;
#define LC_EP_REMOTE_ADDRESS (1u << 0)
#define LC_EP_ERR_MODE (1u << 1)
#define LC_EP_ERR_HANDLER (1u << 2)
#define LC_ERR_MODE_PEER 1

// ucp_mem_map_params_t.
typedef struct {
	uint64_t field_mask;
	void *address;
	size_t length;
	unsigned flags;
	unsigned prot;
	int memory_type;
	char pad[64];
} lc_mem_map_params;
#define LC_MEM_ADDRESS (1u << 0)
#define LC_MEM_LENGTH (1u << 1)

// ucp_request_param_t.
typedef struct {
	uint32_t op_attr_mask;
	uint32_t flags;
	void *request;
	void *cb;
	uint64_t datatype;
	void *user_data;
	void *reply_buffer;
	int memory_type;
	size_t recv_info;
	void *memh;
	char pad[64];
} lc_req_param;
#define LC_OP_FLAGS (1u << 4)
#define LC_AM_SEND_EAGER (1u << 1)
#define LC_AM_SEND_RNDV (1u << 2)
#define LC_OP_CALLBACK (1u << 1)
#define LC_OP_USER_DATA (1u << 2)
#define LC_EP_CLOSE_FORCE 1

// ucp_context_attr_t: the memory types the context can register.
typedef struct {
	uint64_t field_mask;
	size_t request_size;
	int thread_mode;
	uint64_t memory_types;
	char name[32];
	char pad[64];
} lc_context_attr;
#define LC_ATTR_MEMORY_TYPES (1u << 2)

typedef struct {
	lc_status (*config_read)(const char *, const char *, lc_h *);
	void (*config_release)(lc_h);
	void (*get_version)(unsigned *, unsigned *, unsigned *);
	lc_status (*init_version)(unsigned, unsigned, const lc_ucp_params *, lc_h, lc_h *);
	void (*cleanup)(lc_h);
	lc_status (*context_query)(lc_h, lc_context_attr *);
	void (*context_print_info)(lc_h, FILE *);
	lc_status (*worker_create)(lc_h, const lc_worker_params *, lc_h *);
	void (*worker_destroy)(lc_h);
	lc_status (*worker_get_address)(lc_h, lc_h *, size_t *);
	void (*worker_release_address)(lc_h, lc_h);
	unsigned (*worker_progress)(lc_h);
	lc_status (*worker_fence)(lc_h);
	lc_status (*worker_get_efd)(lc_h, int *);
	lc_status (*worker_arm)(lc_h);
	lc_status (*worker_signal)(lc_h);
	lc_status (*ep_create)(lc_h, const lc_ep_params *, lc_h *);
	void *(*ep_close_nbx)(lc_h, const lc_req_param *);
	void *(*ep_flush_nbx)(lc_h, const lc_req_param *);
	void (*ep_print_info)(lc_h, FILE *);
	lc_status (*mem_map)(lc_h, const lc_mem_map_params *, lc_h *);
	lc_status (*mem_unmap)(lc_h, lc_h);
	lc_status (*rkey_pack)(lc_h, lc_h, void **, size_t *);
	void (*rkey_buffer_release)(void *);
	lc_status (*ep_rkey_unpack)(lc_h, const void *, lc_h *);
	void (*rkey_destroy)(lc_h);
	void *(*put_nbx)(lc_h, const void *, size_t, uint64_t, lc_h, const lc_req_param *);
	void *(*get_nbx)(lc_h, void *, size_t, uint64_t, lc_h, const lc_req_param *);
	void *(*am_send_nbx)(lc_h, unsigned, const void *, size_t, const void *, size_t, const lc_req_param *);
	void *(*am_recv_data_nbx)(lc_h, void *, void *, size_t, const lc_req_param *);
	lc_status (*worker_set_am_recv_handler)(lc_h, const void *);
	lc_status (*request_check_status)(void *);
	void (*request_free)(void *);
	const char *(*status_string)(lc_status);
} lc_ucx;

// lc_ucx_load opens the libraries and resolves every entry point; it
// returns 0, or writes why not into err.
static int lc_ucx_load(lc_ucx *u, const char *ucs_name, const char *ucp_name, char *err, size_t errlen) {
	// UCX's defaults that fight the Go runtime: handlers for synchronous
	// signals (Go turns SIGSEGV into panics) and hooks patched into the C
	// library's mmap (the runtime maps its heap through it). A user's own
	// settings win.
	setenv("UCX_ERROR_SIGNALS", "", 0);
	setenv("UCX_MEM_EVENTS", "n", 0);
	setenv("UCX_MEM_MALLOC_HOOKS", "n", 0);
	void *ucs = dlopen(ucs_name, RTLD_NOW | RTLD_GLOBAL);
	if (!ucs) {
		snprintf(err, errlen, "%s", dlerror());
		return -1;
	}
	void *ucp = dlopen(ucp_name, RTLD_NOW | RTLD_LOCAL);
	if (!ucp) {
		snprintf(err, errlen, "%s", dlerror());
		return -1;
	}
#define LC_SYM(lib, field, name)                                             \
	do {                                                                 \
		*(void **)&u->field = dlsym(lib, name);                      \
		if (!u->field) {                                             \
			snprintf(err, errlen, "%s: symbol %s missing", #lib, name); \
			return -1;                                           \
		}                                                            \
	} while (0)
	LC_SYM(ucp, config_read, "ucp_config_read");
	LC_SYM(ucp, config_release, "ucp_config_release");
	LC_SYM(ucp, get_version, "ucp_get_version");
	LC_SYM(ucp, init_version, "ucp_init_version");
	LC_SYM(ucp, cleanup, "ucp_cleanup");
	LC_SYM(ucp, context_query, "ucp_context_query");
	LC_SYM(ucp, context_print_info, "ucp_context_print_info");
	LC_SYM(ucp, worker_create, "ucp_worker_create");
	LC_SYM(ucp, worker_destroy, "ucp_worker_destroy");
	LC_SYM(ucp, worker_get_address, "ucp_worker_get_address");
	LC_SYM(ucp, worker_release_address, "ucp_worker_release_address");
	LC_SYM(ucp, worker_progress, "ucp_worker_progress");
	LC_SYM(ucp, worker_fence, "ucp_worker_fence");
	LC_SYM(ucp, worker_get_efd, "ucp_worker_get_efd");
	LC_SYM(ucp, worker_arm, "ucp_worker_arm");
	LC_SYM(ucp, worker_signal, "ucp_worker_signal");
	LC_SYM(ucp, ep_create, "ucp_ep_create");
	LC_SYM(ucp, ep_close_nbx, "ucp_ep_close_nbx");
	LC_SYM(ucp, ep_flush_nbx, "ucp_ep_flush_nbx");
	LC_SYM(ucp, ep_print_info, "ucp_ep_print_info");
	LC_SYM(ucp, mem_map, "ucp_mem_map");
	LC_SYM(ucp, mem_unmap, "ucp_mem_unmap");
	LC_SYM(ucp, rkey_pack, "ucp_rkey_pack");
	LC_SYM(ucp, rkey_buffer_release, "ucp_rkey_buffer_release");
	LC_SYM(ucp, ep_rkey_unpack, "ucp_ep_rkey_unpack");
	LC_SYM(ucp, rkey_destroy, "ucp_rkey_destroy");
	LC_SYM(ucp, put_nbx, "ucp_put_nbx");
	LC_SYM(ucp, get_nbx, "ucp_get_nbx");
	LC_SYM(ucp, am_send_nbx, "ucp_am_send_nbx");
	LC_SYM(ucp, am_recv_data_nbx, "ucp_am_recv_data_nbx");
	LC_SYM(ucp, worker_set_am_recv_handler, "ucp_worker_set_am_recv_handler");
	LC_SYM(ucp, request_check_status, "ucp_request_check_status");
	LC_SYM(ucp, request_free, "ucp_request_free");
	LC_SYM(ucs, status_string, "ucs_status_string");
#undef LC_SYM
	return 0;
}

// A pointer returned by an _nbx call: NULL (done), an error status, or a
// request.
static inline int lc_ptr_is_err(void *p) { return (uintptr_t)p >= (uintptr_t)(intptr_t)LC_ERR_LAST; }
static inline lc_status lc_ptr_status(void *p) {
	if (p == NULL) return LC_OK;
	if (lc_ptr_is_err(p)) return (lc_status)(intptr_t)p;
	return LC_INPROGRESS;
}

// lc_ucx_worker_new makes a worker of ctx used from one thread at a time.
static lc_status lc_ucx_worker_new(lc_ucx *u, lc_h ctx, lc_h *worker) {
	lc_worker_params wp;
	memset(&wp, 0, sizeof wp);
	wp.field_mask = LC_WORKER_THREAD_MODE;
	wp.thread_mode = LC_THREAD_SERIALIZED;
	return u->worker_create(ctx, &wp, worker);
}

// lc_ucx_open makes the context (RMA, active messages, wake-up) and one
// worker used from one thread at a time.
static lc_status lc_ucx_open(lc_ucx *u, lc_h *ctx, lc_h *worker, const char **where) {
	lc_h cfg;
	lc_status s = u->config_read(NULL, NULL, &cfg);
	if (s != LC_OK) {
		*where = "ucp_config_read";
		return s;
	}
	lc_ucp_params p;
	memset(&p, 0, sizeof p);
	p.field_mask = LC_PARAM_FEATURES;
	p.features = LC_FEATURE_RMA | LC_FEATURE_WAKEUP | LC_FEATURE_AM;
	s = u->init_version(1, 10, &p, cfg, ctx);
	u->config_release(cfg);
	if (s != LC_OK) {
		*where = "ucp_init";
		return s;
	}
	s = lc_ucx_worker_new(u, *ctx, worker);
	if (s != LC_OK) {
		u->cleanup(*ctx);
		*where = "ucp_worker_create";
	}
	return s;
}

// Endpoint failures land in a status word the caller owns (one per peer).
static void lc_ep_failed(void *arg, lc_h ep, lc_status status) {
	(void)ep;
	__atomic_store_n((int32_t *)arg, (int32_t)status, __ATOMIC_RELEASE);
}

static lc_status lc_ucx_ep_create(lc_ucx *u, lc_h worker, const void *addr, int32_t *failed, lc_h *ep) {
	lc_ep_params p;
	memset(&p, 0, sizeof p);
	p.field_mask = LC_EP_REMOTE_ADDRESS | LC_EP_ERR_MODE | LC_EP_ERR_HANDLER;
	p.address = addr;
	p.err_mode = LC_ERR_MODE_PEER;
	p.err_cb = lc_ep_failed;
	p.err_arg = failed;
	return u->ep_create(worker, &p, ep);
}

static inline int32_t lc_load_status(int32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void lc_store_status(int32_t *p, int32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static void *lc_ucx_ep_close(lc_ucx *u, lc_h ep, int force) {
	lc_req_param p;
	memset(&p, 0, sizeof p);
	if (force) {
		p.op_attr_mask = LC_OP_FLAGS;
		p.flags = LC_EP_CLOSE_FORCE;
	}
	return u->ep_close_nbx(ep, &p);
}

static void *lc_ucx_ep_flush(lc_ucx *u, lc_h ep) {
	lc_req_param p;
	memset(&p, 0, sizeof p);
	return u->ep_flush_nbx(ep, &p);
}

static lc_status lc_ucx_mem_map(lc_ucx *u, lc_h ctx, void *addr, size_t len, lc_h *memh) {
	lc_mem_map_params p;
	memset(&p, 0, sizeof p);
	p.field_mask = LC_MEM_ADDRESS | LC_MEM_LENGTH;
	p.address = addr;
	p.length = len;
	return u->mem_map(ctx, &p, memh);
}

static void *lc_ucx_put(lc_ucx *u, lc_h ep, const void *buf, size_t n, uint64_t raddr, lc_h rkey) {
	lc_req_param p;
	memset(&p, 0, sizeof p);
	return u->put_nbx(ep, buf, n, raddr, rkey, &p);
}

static void *lc_ucx_get(lc_ucx *u, lc_h ep, void *buf, size_t n, uint64_t raddr, lc_h rkey) {
	lc_req_param p;
	memset(&p, 0, sizeof p);
	return u->get_nbx(ep, buf, n, raddr, rkey, &p);
}

static uint64_t lc_ucx_memory_types(lc_ucx *u, lc_h ctx) {
	lc_context_attr a;
	memset(&a, 0, sizeof a);
	a.field_mask = LC_ATTR_MEMORY_TYPES;
	if (u->context_query(ctx, &a) != LC_OK) return 0;
	return a.memory_types;
}

// lc_ucx_print captures what a print_info call writes; free the result.
static char *lc_ucx_print(lc_ucx *u, lc_h h, int ep) {
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f) return NULL;
	if (ep)
		u->ep_print_info(h, f);
	else
		u->context_print_info(h, f);
	fclose(f);
	return buf;
}

// Small puts with their signal travel as one active message: the target
// copies the data, then sets or adds the signal (release), so the signal
// lands after its data in one message. Large puts (with or without a
// signal) travel as active messages by rendezvous: the target has UCX
// move the data straight into the window (ucp_am_recv_data_nbx), then
// applies the signal and tells the sender how many of its messages it
// applied (an acknowledgement message), which is how the sender's flush
// learns that they landed. A sender's messages are applied in the order
// sent: one that arrives while a rendezvous before it is still moving its
// data waits, copied, behind it. The target only writes into the regions
// it registered; anything else is dropped and recorded.
#define LC_AM_PUT_SIGNAL 23
#define LC_AM_PUT_RNDV 24
#define LC_AM_ACK 25
#define LC_SIG_ADD 0
#define LC_SIG_SET 1
#define LC_SIG_NONE 2
#define LC_SIG_ACKREQ 3 // no data, no signal: once applied, acknowledge (a flush asks)

typedef struct {
	uint64_t dst, slot, value;
	uint64_t ack; // how many of the receiver's messages the sender applied so far
	uint64_t seq; // this message's number among the sender's to this receiver, from 1
	uint32_t op;
	int32_t rank; // the sender
} lc_ps_hdr;

// An acknowledgement: the sender of it applied `applied` of the receiver's
// messages; failed says it dropped one (and drops every later one).
typedef struct {
	int32_t rank;
	int32_t failed;
	uint64_t applied;
} lc_ack_hdr;

struct lc_am_state;

// A message waiting for those before it from the same sender.
typedef struct lc_am_msg {
	struct lc_am_msg *next;
	struct lc_am_state *s;
	lc_ps_hdr h;
	size_t len;
	int rndv;   // its data comes by rendezvous straight to h.dst
	int done;   // (rndv) the transfer ended
	int failed; // (rndv) ... without the data
	unsigned char data[]; // (eager) a copy of the payload
} lc_am_msg;

typedef struct lc_am_state {
	uint64_t *base, *len; // registered regions of this rank
	size_t n, cap;
	int32_t bad_rank;     // first sender of a malformed message, -1: none
	int32_t bad_why;      // 1 header, 2 out of the regions, 3 not eager, 4 sender, 5 rendezvous failed
	uint64_t bad_count;
	int32_t size;         // ranks
	int32_t me;           // this rank
	int32_t closing;      // set before the endpoints close: apply nothing more
	int64_t inflight;     // rendezvous transfers moving data into this rank
	uint64_t *applied;    // per sender: its messages applied here
	uint64_t *next;       // per sender: the number of its next message to apply
	uint8_t *failed;      // per sender: one of its messages was dropped
	uint64_t *acked;      // per peer: how many of ours it says it applied
	uint8_t *nacked;      // per peer: it says it dropped one of ours
	lc_ucx *u;
	lc_h worker;
	lc_h *eps;            // per peer: the endpoint acknowledgements go out on
	lc_ack_hdr *ackbuf;   // per peer: the header of its last acknowledgement
	uint8_t *owed;        // per peer: an acknowledgement is due
	int32_t nowed;        // how many peers are owed one
	lc_am_msg **qhead;    // per sender: messages not applied yet, by number
} lc_am_state;

// ucp_am_handler_param_t.
typedef struct {
	uint64_t field_mask;
	unsigned id;
	uint32_t flags;
	void *cb;
	void *arg;
	char pad[64];
} lc_am_handler_param;
#define LC_AM_HANDLER_ID (1u << 0)
#define LC_AM_HANDLER_CB (1u << 2)
#define LC_AM_HANDLER_ARG (1u << 3)
#define LC_AM_RECV_RNDV (1ull << 17)

static void lc_am_free(lc_am_state *s);

static lc_am_state *lc_am_new(lc_ucx *u, lc_h worker, int32_t size, int32_t me) {
	lc_am_state *s = calloc(1, sizeof *s);
	if (!s) return NULL;
	s->bad_rank = -1;
	s->size = size;
	s->me = me;
	s->u = u;
	s->worker = worker;
	s->applied = calloc(size, sizeof *s->applied);
	s->next = calloc(size, sizeof *s->next);
	s->failed = calloc(size, sizeof *s->failed);
	s->acked = calloc(size, sizeof *s->acked);
	s->nacked = calloc(size, sizeof *s->nacked);
	s->eps = calloc(size, sizeof *s->eps);
	s->ackbuf = calloc(size, sizeof *s->ackbuf);
	s->owed = calloc(size, sizeof *s->owed);
	s->qhead = calloc(size, sizeof *s->qhead);
	if (!s->applied || !s->next || !s->failed || !s->acked || !s->nacked || !s->eps || !s->ackbuf || !s->owed || !s->qhead) {
		lc_am_free(s);
		return NULL;
	}
	for (int32_t r = 0; r < size; r++) s->next[r] = 1;
	return s;
}

// lc_am_free releases the state and the messages still queued; call it
// after the worker is destroyed (no callback can run any more).
static void lc_am_free(lc_am_state *s) {
	if (s->qhead) {
		for (int32_t r = 0; r < s->size; r++) {
			for (lc_am_msg *m = s->qhead[r]; m;) {
				lc_am_msg *next = m->next;
				free(m);
				m = next;
			}
		}
	}
	free(s->applied); free(s->next); free(s->failed); free(s->acked); free(s->nacked);
	free(s->eps); free(s->ackbuf); free(s->owed); free(s->qhead);
	free(s->base); free(s->len);
	free(s);
}

static inline void lc_am_set_ep(lc_am_state *s, int r, lc_h ep) { s->eps[r] = ep; }
static inline void lc_am_close(lc_am_state *s) { s->closing = 1; }
static inline int64_t lc_am_inflight(const lc_am_state *s) { return s->inflight; }
static inline int lc_am_nacked(const lc_am_state *s, int r) { return s->nacked[r]; }

static int lc_am_in(const lc_am_state *s, uint64_t a, uint64_t n) {
	for (size_t i = 0; i < s->n; i++) {
		if (a >= s->base[i] && n <= s->len[i] && a - s->base[i] <= s->len[i] - n) return 1;
	}
	return 0;
}

static void lc_am_bad(lc_am_state *s, int32_t rank, int32_t why) {
	if (s->bad_count++ == 0) {
		s->bad_rank = rank;
		s->bad_why = why;
	}
}

// lc_am_check validates a header; it returns 0 or the reason (bad_why).
static int lc_am_check(const lc_am_state *s, const void *header, size_t hlen, size_t length, lc_ps_hdr *h) {
	if (hlen != sizeof *h) return 1;
	memcpy(h, header, sizeof *h);
	if (h->rank < 0 || h->rank >= s->size) return 4;
	if (h->op > LC_SIG_ACKREQ || (length && !lc_am_in(s, h->dst, length))) return 2;
	if (h->op == LC_SIG_ACKREQ && length) return 2;
	if (h->op <= LC_SIG_SET && (!lc_am_in(s, h->slot, 8) || (h->slot & 7))) return 2;
	return 0;
}

// lc_am_send_ack notes that peer r is owed word of how many of its
// messages this rank applied; the Go side sends it after the progress call
// (lc_am_ack_next), never from inside UCX's callbacks.
static void lc_am_send_ack(lc_am_state *s, int r) {
	if (s->closing || s->owed[r]) return;
	s->owed[r] = 1;
	s->nowed++;
}

// lc_am_ack_next takes the next peer owed an acknowledgement (-1: none)
// and fills its header; the header lives in the state (a later one may
// overwrite it while UCX still holds it: counts only grow, so any value
// sent is true).
static int lc_am_ack_next(lc_am_state *s, lc_ack_hdr **hdr) {
	if (s->nowed == 0 || s->closing) return -1;
	for (int32_t r = 0; r < s->size; r++) {
		if (!s->owed[r]) continue;
		s->owed[r] = 0;
		s->nowed--;
		lc_ack_hdr *h = &s->ackbuf[r];
		h->rank = s->me;
		h->failed = s->failed[r];
		h->applied = s->applied[r];
		*hdr = h;
		return r;
	}
	s->nowed = 0;
	return -1;
}

static inline int32_t lc_am_owed(const lc_am_state *s) { return s->nowed; }

static void *lc_ucx_am(lc_ucx *u, lc_h ep, unsigned id, uint32_t flags, const void *h, size_t hlen, const void *data, size_t n);

static void *lc_ucx_send_ack(lc_ucx *u, lc_h ep, lc_ack_hdr *h) {
	return lc_ucx_am(u, ep, LC_AM_ACK, LC_AM_SEND_EAGER, h, sizeof *h, NULL, 0);
}

// lc_am_fail drops a message of sender r and, from then on, every later
// one (applying them could set a signal whose data never came), and tells
// the sender.
static void lc_am_fail(lc_am_state *s, int r, int32_t why) {
	lc_am_bad(s, r, why);
	if (!s->failed[r]) {
		s->failed[r] = 1;
		lc_am_send_ack(s, r);
	}
}

// lc_am_apply writes a message's data and signal; the regions are checked
// again (the window may have been freed while the message waited).
static int lc_am_apply(lc_am_state *s, const lc_ps_hdr *h, const void *data, size_t length, size_t landed) {
	uint64_t n = length ? length : landed;
	if ((n && !lc_am_in(s, h->dst, n)) || (h->op <= LC_SIG_SET && !lc_am_in(s, h->slot, 8))) return 2;
	if (length) memcpy((void *)(uintptr_t)h->dst, data, length);
	if (h->op == LC_SIG_SET)
		__atomic_store_n((uint64_t *)(uintptr_t)h->slot, h->value, __ATOMIC_RELEASE);
	else if (h->op == LC_SIG_ADD)
		__atomic_fetch_add((uint64_t *)(uintptr_t)h->slot, h->value, __ATOMIC_RELEASE);
	else
		__atomic_thread_fence(__ATOMIC_RELEASE);
	s->applied[h->rank]++;
	if (h->op == LC_SIG_ACKREQ) lc_am_send_ack(s, h->rank);
	return 0;
}

// lc_am_queue inserts m in its sender's queue by number.
static void lc_am_queue(lc_am_state *s, lc_am_msg *m) {
	lc_am_msg **pp = &s->qhead[m->h.rank];
	while (*pp && (*pp)->h.seq < m->h.seq) pp = &(*pp)->next;
	m->next = *pp;
	*pp = m;
}

// lc_am_drain applies sender r's queued messages in order, up to a gap in
// the numbers or a rendezvous still moving its data, and acknowledges the
// rendezvous ones.
static void lc_am_drain(lc_am_state *s, int r) {
	int ack = 0;
	lc_am_msg *m;
	while (!s->closing && (m = s->qhead[r]) && m->h.seq == s->next[r] && (!m->rndv || m->done)) {
		s->qhead[r] = m->next;
		s->next[r]++;
		if (!s->failed[r]) {
			int why = m->failed ? 5 : lc_am_apply(s, &m->h, m->data, m->rndv ? 0 : m->len, m->rndv ? m->len : 0);
			if (why) lc_am_fail(s, r, why);
			else ack |= m->rndv;
		}
		free(m);
	}
	if (ack) lc_am_send_ack(s, r);
}

// lc_am_arrived takes an eager message (header checked): applied at once
// when it is the next of its sender, else copied into the queue.
static void lc_am_arrived(lc_am_state *s, const lc_ps_hdr *h, const void *data, size_t length) {
	int r = h->rank;
	if (h->ack > s->acked[r]) s->acked[r] = h->ack;
	if (s->closing || s->failed[r] || h->seq < s->next[r]) return;
	if (!s->qhead[r] && h->seq == s->next[r]) {
		s->next[r]++;
		int why = lc_am_apply(s, h, data, length, 0);
		if (why) lc_am_fail(s, r, why);
		return;
	}
	lc_am_msg *m = malloc(sizeof *m + length);
	if (!m) {
		lc_am_fail(s, r, 5);
		return;
	}
	memset(m, 0, sizeof *m);
	m->s = s;
	m->h = *h;
	m->len = length;
	if (length) memcpy(m->data, data, length);
	lc_am_queue(s, m);
	lc_am_drain(s, r);
}

static lc_status lc_am_put_signal(void *arg, const void *header, size_t hlen, void *data, size_t length, const void *param) {
	lc_am_state *s = (lc_am_state *)arg;
	uint64_t attr = *(const uint64_t *)param; // ucp_am_recv_param_t.recv_attr
	lc_ps_hdr h;
	int why = lc_am_check(s, header, hlen, length, &h);
	if (why == 0 && (attr & LC_AM_RECV_RNDV)) why = 3;
	if (why == 1 || why == 4) {
		lc_am_bad(s, -1, why);
		return LC_OK;
	}
	if (why) {
		lc_am_fail(s, h.rank, why);
		return LC_OK;
	}
	lc_am_arrived(s, &h, data, length);
	return LC_OK;
}

static void lc_am_rndv_done(void *req, lc_status status, size_t length, void *user) {
	(void)length;
	lc_am_msg *m = (lc_am_msg *)user;
	lc_am_state *s = m->s;
	s->inflight--;
	m->failed = status != LC_OK;
	m->done = 1;
	lc_am_drain(s, m->h.rank);
	if (req) s->u->request_free(req);
}

static lc_status lc_am_put_rndv(void *arg, const void *header, size_t hlen, void *data, size_t length, const void *param) {
	lc_am_state *s = (lc_am_state *)arg;
	uint64_t attr = *(const uint64_t *)param;
	if (!(attr & LC_AM_RECV_RNDV)) return lc_am_put_signal(arg, header, hlen, data, length, param);
	lc_ps_hdr h;
	int why = lc_am_check(s, header, hlen, length, &h);
	if (why == 1 || why == 4) {
		lc_am_bad(s, -1, why);
		return LC_OK; // the descriptor is released: the sender's send fails
	}
	if (why) {
		lc_am_fail(s, h.rank, why);
		return LC_OK;
	}
	int r = h.rank;
	if (h.ack > s->acked[r]) s->acked[r] = h.ack;
	if (s->closing || s->failed[r] || h.seq < s->next[r]) return LC_OK;
	lc_am_msg *m = calloc(1, sizeof *m);
	if (!m) {
		lc_am_fail(s, r, 5);
		return LC_OK;
	}
	m->s = s;
	m->h = h;
	m->len = length;
	m->rndv = 1;
	lc_am_queue(s, m);
	s->inflight++;
	lc_req_param p;
	memset(&p, 0, sizeof p);
	p.op_attr_mask = LC_OP_CALLBACK | LC_OP_USER_DATA;
	p.cb = (void *)lc_am_rndv_done;
	p.user_data = m;
	void *req = s->u->am_recv_data_nbx(s->worker, data, (void *)(uintptr_t)h.dst, length, &p);
	lc_status st = lc_ptr_status(req);
	if (st != LC_INPROGRESS) lc_am_rndv_done(NULL, st, length, m); // at once, or refused
	return LC_OK;
}

static lc_status lc_am_ack(void *arg, const void *header, size_t hlen, void *data, size_t length, const void *param) {
	(void)data; (void)length; (void)param;
	lc_am_state *s = (lc_am_state *)arg;
	lc_ack_hdr h;
	if (hlen != sizeof h) {
		lc_am_bad(s, -1, 1);
		return LC_OK;
	}
	memcpy(&h, header, sizeof h);
	if (h.rank < 0 || h.rank >= s->size) {
		lc_am_bad(s, -1, 4);
		return LC_OK;
	}
	if (h.failed) s->nacked[h.rank] = 1;
	if (h.applied > s->acked[h.rank]) s->acked[h.rank] = h.applied;
	return LC_OK;
}

static inline uint64_t lc_am_applied(const lc_am_state *s, int r) { return s->applied[r]; }
static inline uint64_t lc_am_acked(const lc_am_state *s, int r) { return s->acked[r]; }

static lc_status lc_ucx_set_am(lc_ucx *u, lc_h worker, lc_am_state *s) {
	unsigned ids[3] = {LC_AM_PUT_SIGNAL, LC_AM_PUT_RNDV, LC_AM_ACK};
	void *cbs[3] = {(void *)lc_am_put_signal, (void *)lc_am_put_rndv, (void *)lc_am_ack};
	for (int i = 0; i < 3; i++) {
		lc_am_handler_param p;
		memset(&p, 0, sizeof p);
		p.field_mask = LC_AM_HANDLER_ID | LC_AM_HANDLER_CB | LC_AM_HANDLER_ARG;
		p.id = ids[i];
		p.cb = cbs[i];
		p.arg = s;
		lc_status st = u->worker_set_am_recv_handler(worker, &p);
		if (st != LC_OK) return st;
	}
	return LC_OK;
}

static int lc_am_add_region(lc_am_state *s, uint64_t base, uint64_t len) {
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		uint64_t *b = realloc(s->base, cap * sizeof *b);
		if (!b) return -1;
		s->base = b;
		uint64_t *l = realloc(s->len, cap * sizeof *l);
		if (!l) return -1;
		s->len = l;
		s->cap = cap;
	}
	s->base[s->n] = base;
	s->len[s->n] = len;
	s->n++;
	return 0;
}

static void lc_am_remove_region(lc_am_state *s, uint64_t base) {
	for (size_t i = 0; i < s->n; i++) {
		if (s->base[i] == base) {
			s->base[i] = s->base[s->n - 1];
			s->len[i] = s->len[s->n - 1];
			s->n--;
			return;
		}
	}
}

// lc_ucx_am sends active message id with the protocol flags ask for
// (eager or rendezvous); the header must live until the request completes.
static void *lc_ucx_am(lc_ucx *u, lc_h ep, unsigned id, uint32_t flags, const void *h, size_t hlen, const void *data, size_t n) {
	lc_req_param p;
	memset(&p, 0, sizeof p);
	p.op_attr_mask = LC_OP_FLAGS;
	p.flags = flags;
	return u->am_send_nbx(ep, id, h, hlen, data, n, &p);
}

// A small put_signal, eagerly.
static void *lc_ucx_am_send(lc_ucx *u, lc_h ep, const lc_ps_hdr *h, const void *data, size_t n) {
	return lc_ucx_am(u, ep, LC_AM_PUT_SIGNAL, LC_AM_SEND_EAGER, h, sizeof *h, data, n);
}

// A large put (with its signal, if any), by rendezvous.
static void *lc_ucx_am_send_rndv(lc_ucx *u, lc_h ep, const lc_ps_hdr *h, const void *data, size_t n) {
	return lc_ucx_am(u, ep, LC_AM_PUT_RNDV, LC_AM_SEND_RNDV, h, sizeof *h, data, n);
}

// Thin calls through the table.
static inline unsigned lc_ucx_progress(lc_ucx *u, lc_h w) { return u->worker_progress(w); }
static inline lc_status lc_ucx_fence(lc_ucx *u, lc_h w) { return u->worker_fence(w); }
static inline lc_status lc_ucx_arm(lc_ucx *u, lc_h w) { return u->worker_arm(w); }
static inline lc_status lc_ucx_signal(lc_ucx *u, lc_h w) { return u->worker_signal(w); }
static inline lc_status lc_ucx_efd(lc_ucx *u, lc_h w, int *fd) { return u->worker_get_efd(w, fd); }
static inline lc_status lc_ucx_req_status(lc_ucx *u, void *r) { return u->request_check_status(r); }
static inline void lc_ucx_req_free(lc_ucx *u, void *r) { u->request_free(r); }
static inline const char *lc_ucx_strerror(lc_ucx *u, lc_status s) { return u->status_string(s); }
static inline void lc_ucx_version(lc_ucx *u, unsigned *a, unsigned *b, unsigned *c) { u->get_version(a, b, c); }
static inline lc_status lc_ucx_address(lc_ucx *u, lc_h w, lc_h *a, size_t *n) { return u->worker_get_address(w, a, n); }
static inline void lc_ucx_release_address(lc_ucx *u, lc_h w, lc_h a) { u->worker_release_address(w, a); }
static inline void lc_ucx_worker_destroy(lc_ucx *u, lc_h w) { u->worker_destroy(w); }
static inline void lc_ucx_cleanup(lc_ucx *u, lc_h c) { u->cleanup(c); }
static inline lc_status lc_ucx_mem_unmap(lc_ucx *u, lc_h c, lc_h m) { return u->mem_unmap(c, m); }
static inline lc_status lc_ucx_rkey_pack(lc_ucx *u, lc_h c, lc_h m, void **b, size_t *n) { return u->rkey_pack(c, m, b, n); }
static inline void lc_ucx_rkey_release(lc_ucx *u, void *b) { u->rkey_buffer_release(b); }
static inline lc_status lc_ucx_rkey_unpack(lc_ucx *u, lc_h ep, const void *b, lc_h *k) { return u->ep_rkey_unpack(ep, b, k); }
static inline void lc_ucx_rkey_destroy(lc_ucx *u, lc_h k) { u->rkey_destroy(k); }

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU backend's queue engine: streams as worker threads draining a FIFO of commands, event records, the
 * commands and what running each does (a kernel, a record, a wait, a callback, a copy, a free that hands its block
 * to the pool), the blocks' headers and the backend's global state. The bottom of the CPU backend's files. */
#ifndef DLSTREAM_BACKEND_CPU_QUEUE_H
#define DLSTREAM_BACKEND_CPU_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/error.h"

#define CPU_STREAM_MAGIC 0x5354524du /* "STRM" */
#define CPU_EVENT_MAGIC 0x45564e54u  /* "EVNT" */
#define CPU_ALIGN 256
#define CPU_MAX_DEVICES 8 /* DLSTREAM_CPU_DEVICES=N makes N CPU devices (default 1) */

enum { CMD_LAUNCH = 1, CMD_RECORD, CMD_WAIT, CMD_CALLBACK, CMD_MEMCPY, CMD_FREE, CMD_EXIT };

typedef struct cpu_fn {
  dls_host_kernel fn;
  char name[64];
  _Atomic int refs; /* owner + queued launches; built-ins are static (0) */
} cpu_fn;

/* One record of an event. A record made on a capturing stream is a
 * placeholder (cap_id != 0): it names a point of the capture and never
 * completes; each replay makes a real record for it. */
typedef struct cpu_node {
  _Atomic int refs;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  uint64_t t_ns;
  uint64_t cap_id; /* placeholder: its capture's id */
  int cap_index;   /* placeholder: its index among the capture's records */
} cpu_node;

/* A registry of live objects, so a foreign pointer can be checked before it
 * is used. The link is each object's first member: a link's address is its
 * object's. Guarded by g.mu. */
typedef struct cpu_link {
  struct cpu_link *prev, *next;
} cpu_link;

static inline void link_push(cpu_link **head, cpu_link *l) {
  l->prev = NULL;
  l->next = *head;
  if (*head)
    (*head)->prev = l;
  *head = l;
}

static inline void link_remove(cpu_link **head, cpu_link *l) {
  if (l->prev)
    l->prev->next = l->next;
  else
    *head = l->next;
  if (l->next)
    l->next->prev = l->prev;
}

static inline bool link_has(const cpu_link *head, const void *obj) {
  while (head != NULL && (const void *)head != obj)
    head = head->next;
  return head != NULL;
}

typedef struct cpu_block cpu_block;
typedef struct cpu_stream cpu_stream;
typedef struct cpu_capture cpu_capture;

struct cpu_block { /* header in front of every allocation */
  size_t size;     /* rounded size of the data */
  int state;       /* BLOCK_* */
  uint64_t free_seq;
  cpu_stream *pending_on;
  cpu_block *next;
  /* BLOCK_GRAPH only (under g.mu), as CUDA's graph allocations: */
  uint64_t cap_id; /* the capture that allocated it */
  bool temp;       /* freed in that capture: its graph's replays allocate and free it */
  bool outstanding; /* an output whose latest replay's instance was not freed yet: it outlives the graph */
  bool orphan;     /* the graph went while an instance was outstanding or its free queued: the last free frees it */
  int frees_queued; /* frees of an instance queued on a stream and not run yet */
};
/* BLOCK_GRAPH: allocated in a capture; the capture, then its graph, owns it. */
enum { BLOCK_LIVE = 1, BLOCK_PENDING, BLOCK_POOLED, BLOCK_GRAPH };
_Static_assert(sizeof(cpu_block) <= CPU_ALIGN, "block header fits in front of the data");

typedef struct cpu_cmd {
  struct cpu_cmd *next;
  int type;
  int track;    /* in a capture: the index of the stream that queued it */
  size_t extra; /* bytes of data[] (a replay clones the command) */
  union {
    struct { const cpu_fn *fn; dls_launch_config_t cfg; int n; void **ptrs; } launch;
    struct { cpu_node *node; int index; } rec; /* in a capture: index, not node */
    struct { dls_host_fn fn; void *user; } cb;
    struct { void *dst; const void *src; size_t n; } cp;
    struct { cpu_block *blk; uint64_t seq; } fr;
  } u;
  _Alignas(16) unsigned char data[];
} cpu_cmd;

struct cpu_stream {
  cpu_link link; /* first: the registry of live streams */
  uint32_t magic;
  int dev;
  pthread_mutex_t mu;
  pthread_cond_t cv_work, cv_idle;
  cpu_cmd *head, *tail;
  uint64_t submitted, completed;
  int error;
  char errmsg[160];
  cpu_block *pending;  /* blocks freed on this stream, not yet pooled */
  cpu_capture *cap;    /* the capture it is part of, or NULL (guarded by g.mu) */
  int track;           /* its index in that capture */
};

/* The backend's global state. */
typedef struct cpu_globals {
  pthread_mutex_t mu;      /* registry, pool, workers, captures */
  pthread_cond_t cv_exit;  /* a worker exited */
  int sync_mode;
  int debug_alloc;
  int jitter_us;           /* DLSTREAM_CPU_JITTER: each command waits 0 to this many µs first (tests' races) */
  int ndevices;
  int workers;             /* live worker threads */
  int exiting;             /* workers told to exit and not yet gone */
  cpu_link *events;        /* registry of live events (for wrap checks) */
  cpu_link *streams;       /* registry of live streams */
  cpu_stream *dflt[CPU_MAX_DEVICES]; /* each device's default stream */
  cpu_block *pool;         /* idle blocks */
  size_t pool_bytes;
  cpu_capture *captures;   /* captures underway */
  uint64_t next_capture_id;
} cpu_globals;

DLS__INTERNAL extern cpu_globals dls__cpu_g;

/* A block's header and its data (CPU_ALIGN bytes after it). */
static inline cpu_block *cpu_block_of(void *ptr) { return (cpu_block *)((char *)ptr - CPU_ALIGN); }
static inline void *cpu_block_data(cpu_block *b) { return (char *)b + CPU_ALIGN; }

DLS__INTERNAL cpu_node *dls__cpu_node_new(void);
DLS__INTERNAL void dls__cpu_node_unref(cpu_node *n);
DLS__INTERNAL cpu_cmd *dls__cpu_cmd_new(int type, size_t extra);
/* Frees a command that will not run, dropping what it references. */
DLS__INTERNAL void dls__cpu_cmd_discard(cpu_cmd *c);
/* Queues a command on a stream that is not capturing (steals c, also on failure). */
DLS__INTERNAL dls_status_t dls__cpu_enqueue(cpu_stream *s, cpu_cmd *c);
/* A host function's references: its owner and each queued launch (built-ins are static: not counted). */
DLS__INTERNAL void dls__cpu_fn_ref(const cpu_fn *f);
DLS__INTERNAL void dls__cpu_fn_unref(cpu_fn *f);
/* Returns a block to the system (poisoned first under DLSTREAM_DEBUG_ALLOC=1). */
DLS__INTERNAL void dls__cpu_block_release(cpu_block *b);
DLS__INTERNAL void dls__cpu_node_wait(cpu_node *n);
DLS__INTERNAL int dls__cpu_node_done(cpu_node *n);
DLS__INTERNAL uint64_t dls__cpu_now_ns(void);
DLS__INTERNAL dls_status_t dls__cpu_stream_create(const dls__backend *be, int dev, unsigned flags, int priority,
                                                  void **out);
/* Ends a stream that is in no capture: its worker drains what is queued, then frees it (no host wait). */
DLS__INTERNAL dls_status_t dls__cpu_queue_end(cpu_stream *s);

#endif /* DLSTREAM_BACKEND_CPU_QUEUE_H */

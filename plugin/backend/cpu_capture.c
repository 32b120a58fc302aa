/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU backend's graph capture: a capturing stream records its commands
 * instead of running them; a graph replays them with fresh event records.
 *
 * The model is CUDA's: a stream that waits on an event recorded in a capture
 * joins it; every stream that joined must rejoin the origin before the
 * capture ends; work is recorded in the order it is queued, which is an order
 * in which it can be replayed; memory allocated in a capture belongs to the
 * capture, then to its graph, which frees it after its last replay. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_internal.h"

#define g dls__cpu_g

typedef struct cpu_graph {
  int dev;
  int ntracks;
  cpu_stream **workers; /* the streams that replay tracks 1.. (track 0 runs on the launch stream) */
  cpu_cmd *cmds;        /* in capture order */
  int ncmds;
  int nrecords;
  cpu_block *blocks;    /* what the capture allocated */
  _Atomic int refs;     /* the handle + replays queued and not yet finished */
} cpu_graph;

static void free_cmds(cpu_cmd *c) {
  while (c != NULL) {
    cpu_cmd *next = c->next;
    dls__cpu_cmd_discard(c);
    c = next;
  }
}

/* A capture's blocks go with it (g.mu held): none was replayed. */
static void free_capture_blocks(cpu_block *b) {
  while (b != NULL) {
    cpu_block *next = b->next;
    dls__cpu_block_release(b);
    b = next;
  }
}

/* A graph's blocks go with it, but for outputs whose latest replay's instance is outstanding or whose free is
 * queued: as CUDA's, that instance outlives the graph until it is freed, in stream order (dls__cpu_mem_free). */
static void free_graph_blocks(cpu_block *b) {
  while (b != NULL) {
    pthread_mutex_lock(&g.mu);
    cpu_block *next = b->next;
    bool keep = b->outstanding || b->frees_queued > 0;
    if (keep) {
      b->orphan = true;
      b->next = NULL;
    }
    pthread_mutex_unlock(&g.mu);
    if (!keep)
      dls__cpu_block_release(b);
    b = next;
  }
}

/* A replay makes an instance of each output (what its capture allocated and did not free). g.mu held. */
static void outputs_outstanding(cpu_block *b) {
  for (; b != NULL; b = b->next)
    b->outstanding = !b->temp;
}

/* Removes a capture from the registry and frees it; its streams leave it. g.mu held. */
static void capture_free(cpu_capture *cap, bool keep_contents) {
  for (cpu_capture **pp = &g.captures; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == cap) {
      *pp = cap->next;
      break;
    }
  }
  for (int i = 0; i < cap->ntracks; i++)
    if (cap->tracks[i] != NULL)
      cap->tracks[i]->cap = NULL;
  if (!keep_contents) {
    free_cmds(cap->head);
    free_capture_blocks(cap->blocks);
  }
  free(cap->tracks);
  free(cap);
}

dls_status_t dls__cpu_capture_append(cpu_stream *s, cpu_cmd *c) {
  cpu_capture *cap = s->cap;
  if (cap->status != DLS__CAPTURE_ACTIVE) {
    dls__cpu_cmd_discard(c);
    return dls__fail(DLS_ERR_STATE, "cpu backend: capture %llu was invalidated (%s); end it to discard it",
                     (unsigned long long)cap->id, cap->why);
  }
  c->track = s->track;
  c->next = NULL;
  if (cap->tail)
    cap->tail->next = c;
  else
    cap->head = c;
  cap->tail = c;
  return DLS_OK;
}

/* Queues a command, or records it when the stream is capturing (steals c). */
dls_status_t dls__cpu_submit(cpu_stream *s, cpu_cmd *c) {
  if (c == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a stream command");
  pthread_mutex_lock(&g.mu);
  if (s->cap != NULL) {
    dls_status_t st = dls__cpu_capture_append(s, c);
    pthread_mutex_unlock(&g.mu);
    return st;
  }
  pthread_mutex_unlock(&g.mu);
  return dls__cpu_enqueue(s, c);
}

/* Fails (and invalidates the capture, as CUDA does) when `s` is capturing:
 * `what` cannot be recorded or would look at work that does not run. */
dls_status_t dls__cpu_refuse_capturing(cpu_stream *s, const char *what) {
  pthread_mutex_lock(&g.mu);
  cpu_capture *cap = s->cap;
  uint64_t id = cap ? cap->id : 0;
  if (cap != NULL)
    dls__cpu_capture_invalidate(cap, what);
  pthread_mutex_unlock(&g.mu);
  if (cap == NULL)
    return DLS_OK;
  return dls__fail(DLS_ERR_STATE, "cpu backend: %s on stream %p, which is capturing (capture %llu, now invalidated)",
                   what, (void *)s, (unsigned long long)id);
}

void dls__cpu_capture_invalidate(cpu_capture *cap, const char *why) {
  if (cap->status == DLS__CAPTURE_INVALIDATED)
    return;
  cap->status = DLS__CAPTURE_INVALIDATED;
  snprintf(cap->why, sizeof cap->why, "%s", why);
}

cpu_capture *dls__cpu_capture_find(uint64_t id) {
  cpu_capture *cap = g.captures;
  while (cap != NULL && cap->id != id)
    cap = cap->next;
  return cap;
}

dls_status_t dls__cpu_capture_join(cpu_capture *cap, cpu_stream *s) {
  if (cap->status != DLS__CAPTURE_ACTIVE)
    return dls__fail(DLS_ERR_STATE, "cpu backend: capture %llu was invalidated (%s)", (unsigned long long)cap->id,
                     cap->why);
  if (cap->ntracks == cap->cap_tracks) {
    int n = cap->cap_tracks * 2;
    cpu_stream **p = realloc(cap->tracks, (size_t)n * sizeof *p);
    if (p == NULL)
      return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a stream joining a capture");
    cap->tracks = p;
    cap->cap_tracks = n;
  }
  s->cap = cap;
  s->track = cap->ntracks;
  cap->tracks[cap->ntracks++] = s;
  return DLS_OK;
}

void dls__cpu_capture_drop_stream(cpu_stream *s) {
  cpu_capture *cap = s->cap;
  if (s->track == 0) {
    capture_free(cap, false); /* nobody can end it any more */
    return;
  }
  cap->tracks[s->track] = NULL;
  s->cap = NULL;
  dls__cpu_capture_invalidate(cap, "a stream that joined the capture was destroyed");
}

dls_status_t dls__cpu_capture_status(const dls__backend *be, int dev, void *stream, int *out_status,
                                     uint64_t *out_id) {
  (void)dev;
  cpu_stream *s = stream;
  pthread_mutex_lock(&g.mu);
  *out_status = s->cap != NULL ? s->cap->status : DLS__CAPTURE_NONE;
  *out_id = s->cap != NULL ? s->cap->id : 0;
  pthread_mutex_unlock(&g.mu);
  return DLS_OK;
}

dls_status_t dls__cpu_begin_capture(const dls__backend *be, int dev, void *stream, int mode) {
  (void)dev;
  cpu_stream *s = stream;
  cpu_capture *cap = calloc(1, sizeof *cap);
  cpu_stream **tracks = malloc(4 * sizeof *tracks);
  if (cap == NULL || tracks == NULL) {
    free(cap);
    free(tracks);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a capture");
  }
  pthread_mutex_lock(&g.mu);
  if (s->cap != NULL) {
    uint64_t id = s->cap->id;
    pthread_mutex_unlock(&g.mu);
    free(cap);
    free(tracks);
    return dls__fail(DLS_ERR_STATE, "cpu backend: stream %p is already capturing (capture %llu)", stream,
                     (unsigned long long)id);
  }
  cap->id = ++g.next_capture_id;
  cap->mode = mode;
  cap->status = DLS__CAPTURE_ACTIVE;
  cap->tracks = tracks;
  cap->cap_tracks = 4;
  cap->ntracks = 1;
  tracks[0] = s;
  cap->next = g.captures;
  g.captures = cap;
  s->cap = cap;
  s->track = 0;
  pthread_mutex_unlock(&g.mu);
  return DLS_OK;
}

/* A stream that joined has rejoined when it did nothing after its joining
 * wait, or when its last command is a record another stream waited on. */
static int unjoined_track(const cpu_capture *cap) {
  for (int k = 1; k < cap->ntracks; k++) {
    const cpu_cmd *last = NULL;
    for (const cpu_cmd *c = cap->head; c != NULL; c = c->next)
      if (c->track == k)
        last = c;
    if (last == NULL || last->type == CMD_WAIT)
      continue;
    bool joined = false;
    if (last->type == CMD_RECORD)
      for (const cpu_cmd *c = last->next; c != NULL && !joined; c = c->next)
        joined = c->type == CMD_WAIT && c->track != k && c->u.rec.index == last->u.rec.index;
    if (!joined)
      return k;
  }
  return 0;
}

static void graph_unref(cpu_graph *gr) {
  if (atomic_fetch_sub(&gr->refs, 1) != 1)
    return;
  for (int k = 0; k < gr->ntracks - 1; k++)
    if (gr->workers[k] != NULL)
      dls__cpu_queue_end(gr->workers[k]);
  free(gr->workers);
  free_cmds(gr->cmds);
  free_graph_blocks(gr->blocks);
  free(gr);
}

dls_status_t dls__cpu_end_capture(const dls__backend *be, int dev, void *stream, void **out_graph) {
  cpu_stream *s = stream;
  cpu_graph *gr = calloc(1, sizeof *gr);
  pthread_mutex_lock(&g.mu);
  cpu_capture *cap = s->cap;
  dls_status_t st = DLS_OK;
  if (cap == NULL) {
    st = dls__fail(DLS_ERR_STATE, "cpu backend: stream %p is not capturing", stream);
  } else if (cap->tracks[0] != s) {
    st = dls__fail(DLS_ERR_STATE,
                   "cpu backend: stream %p joined capture %llu; end it on the stream that began it", stream,
                   (unsigned long long)cap->id);
    cap = NULL; /* the capture goes on */
  } else if (cap->status != DLS__CAPTURE_ACTIVE) {
    st = dls__fail(DLS_ERR_STATE, "cpu backend: capture %llu was invalidated (%s)", (unsigned long long)cap->id,
                   cap->why);
  } else if (unjoined_track(cap) != 0) {
    st = dls__fail(DLS_ERR_STATE,
                   "cpu backend: stream %p joined capture %llu and did not rejoin the stream that began it (make "
                   "that stream wait on an event recorded after the joined stream's last work)",
                   (void *)cap->tracks[unjoined_track(cap)], (unsigned long long)cap->id);
  } else if (gr == NULL) {
    st = dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a graph");
  }
  if (st != DLS_OK) {
    if (cap != NULL)
      capture_free(cap, false); /* a failed end still ends the capture, as CUDA's does */
    pthread_mutex_unlock(&g.mu);
    free(gr);
    return st;
  }
  gr->dev = dev;
  gr->ntracks = cap->ntracks;
  gr->cmds = cap->head;
  gr->nrecords = cap->nrecords;
  gr->blocks = cap->blocks;
  for (cpu_cmd *c = gr->cmds; c != NULL; c = c->next)
    gr->ncmds++;
  atomic_init(&gr->refs, 1);
  capture_free(cap, true);
  pthread_mutex_unlock(&g.mu);
  gr->workers = calloc((size_t)gr->ntracks, sizeof *gr->workers);
  st = gr->workers == NULL ? dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a graph") : DLS_OK;
  for (int k = 0; st == DLS_OK && k < gr->ntracks - 1; k++) {
    void *w = NULL;
    st = dls__cpu_stream_create(be, dev, 0, 0, &w);
    gr->workers[k] = w;
  }
  if (st != DLS_OK) {
    graph_unref(gr);
    return st;
  }
  *out_graph = gr;
  return DLS_OK;
}

static void replay_done(void *user) { graph_unref(user); }

/* A replay's copy of a recorded command, its records made real. */
static cpu_cmd *clone_cmd(const cpu_cmd *c, cpu_node **nodes) {
  cpu_cmd *k = malloc(sizeof *k + c->extra);
  if (k == NULL)
    return NULL;
  memcpy(k, c, sizeof *k + c->extra);
  k->next = NULL;
  if (c->type == CMD_LAUNCH) {
    k->u.launch.ptrs = (void **)(void *)k->data;
    for (int i = 0; i < c->u.launch.n; i++)
      k->u.launch.ptrs[i] = k->data + ((unsigned char *)c->u.launch.ptrs[i] - c->data);
    dls__cpu_fn_ref(c->u.launch.fn);
  } else if (c->type == CMD_RECORD || c->type == CMD_WAIT) {
    k->u.rec.node = nodes[c->u.rec.index];
    atomic_fetch_add(&k->u.rec.node->refs, 1);
  }
  return k;
}

dls_status_t dls__cpu_graph_launch(const dls__backend *be, int dev, void *graph, void *stream) {
  (void)dev;
  cpu_graph *gr = graph;
  cpu_stream *s = stream;
  pthread_mutex_lock(&g.mu);
  bool capturing = s->cap != NULL;
  pthread_mutex_unlock(&g.mu);
  if (capturing)
    return dls__fail(DLS_ERR_NOT_SUPPORTED, "cpu backend: replaying a graph inside a capture (stream %p)", stream);
  /* Everything is made before anything is queued: a replay runs whole or not at all. */
  cpu_node **nodes = calloc((size_t)gr->nrecords + 1, sizeof *nodes);
  cpu_cmd **clones = calloc((size_t)gr->ncmds + 1, sizeof *clones);
  bool ok = nodes != NULL && clones != NULL;
  for (int i = 0; ok && i < gr->nrecords; i++)
    ok = (nodes[i] = dls__cpu_node_new()) != NULL;
  int n = 0;
  for (const cpu_cmd *c = gr->cmds; ok && c != NULL; c = c->next)
    ok = (clones[n++] = clone_cmd(c, nodes)) != NULL;
  cpu_cmd *done = ok ? dls__cpu_cmd_new(CMD_CALLBACK, 0) : NULL;
  if (done == NULL) {
    for (int i = 0; clones != NULL && i < n; i++) {
      if (clones[i] != NULL && (clones[i]->type == CMD_RECORD || clones[i]->type == CMD_WAIT))
        dls__cpu_node_unref(clones[i]->u.rec.node);
      dls__cpu_cmd_discard(clones[i]);
    }
    for (int i = 0; nodes != NULL && i < gr->nrecords; i++)
      dls__cpu_node_unref(nodes[i]);
    free(nodes);
    free(clones);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory to replay a graph of %d commands",
                     gr->ncmds);
  }
  atomic_fetch_add(&gr->refs, 1);
  pthread_mutex_lock(&g.mu);
  outputs_outstanding(gr->blocks);
  pthread_mutex_unlock(&g.mu);
  done->u.cb.fn = replay_done;
  done->u.cb.user = gr;
  for (int i = 0; i < n; i++) {
    int t = clones[i]->track;
    (void)dls__cpu_enqueue(t == 0 ? s : gr->workers[t - 1], clones[i]);
  }
  (void)dls__cpu_enqueue(s, done);
  for (int i = 0; i < gr->nrecords; i++)
    dls__cpu_node_unref(nodes[i]);
  free(nodes);
  free(clones);
  return DLS_OK;
}

dls_status_t dls__cpu_graph_destroy(const dls__backend *be, int dev, void *graph) {
  (void)dev;
  if (graph != NULL)
    graph_unref(graph);
  return DLS_OK;
}

void dls__cpu_captures_shutdown(void) {
  pthread_mutex_lock(&g.mu);
  while (g.captures != NULL)
    capture_free(g.captures, false);
  pthread_mutex_unlock(&g.mu);
}

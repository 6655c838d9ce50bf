/* File: tests/programs/leak_shapes.c
 *
 * One leak shape per mode (argv[1]); each leaves a known set of blocks live at exit, classified by
 * memcheck (--leak-check=full --leak-check-heuristics=none) as follows:
 *   list          a dropped 10-node list of 32-byte nodes: definitely lost 1 (32 B), indirectly lost
 *                 9 (288 B); and 200 bytes kept in a global: still reachable 1 (200 B)
 *   cycle         a dropped cycle of 4 blocks of 48 bytes: definitely lost 1 (48 B), indirectly lost
 *                 3 (144 B)
 *   global        a pointer to a 100-byte block in a global: still reachable 1 (100 B)
 *   interior      only a pointer 16 bytes into a 64-byte block, in a global: possibly lost 1 (64 B)
 *   mmap          a pointer to an 80-byte block kept only in an anonymous mapping of the program's
 *                 own: still reachable 1 (80 B)
 *   shared_mmap   the same, in a shared anonymous mapping (MAP_SHARED | MAP_ANONYMOUS, which the
 *                 kernel lists as /dev/zero): still reachable 1 (80 B)
 *   merged_mmap   the same, in an anonymous mapping of the program's placed right below a 1 MiB block
 *                 (which glibc mmaps for itself: the kernel merges the two mappings into one), the
 *                 large block kept in a global: still reachable 2 (1 MiB + 80 B)
 *   tls_mmap      the same, in an anonymous mapping of the program's placed right above (else right
 *                 below) the mapping that holds the main thread's static TLS and thread descriptor
 *                 (which the dynamic loader mmaps for itself: the kernel merges the two mappings into
 *                 one): still reachable 1 (80 B). Often neither page is free (above lies the last
 *                 object loaded, below what was mapped next): the mapping then lands wherever the
 *                 kernel puts it (the same classes), and the line printed lacks "(its mapping next to
 *                 the TLS)"
 *   guard_page    a 20 KiB block kept in a global, one page of it made PROT_NONE, holding pointers to a
 *                 64-byte block before that page and to a 48-byte block after it: still reachable 3
 *                 (20,592 B); a scan must skip the page, not fault on it
 *   dead_frame    a 72-byte block whose only pointers are copies left in the frame of a function that
 *                 returned (below the stack pointer when main calls exit(), which reuses that stack
 *                 for its own frames): definitely lost 1 (72 B); main does not wipe its stack here
 *   dead_frame_return  the same, and main returns instead of calling exit()
 *   arena_top     a dropped 2,664-byte block (8 mod 16), the last one carved from glibc's heap before
 *                 exit, so that the allocator's own record of its heap's top points into it: definitely
 *                 lost 1 (2,664 B); prints its line before it allocates
 *   many_lost     1,000 dropped blocks of 24 bytes, in rounds of 100, 200, 300 and 400, each followed by a
 *                 40,000-byte block kept in a global (which moves where the allocator serves its next
 *                 blocks, so that their alignment differs from round to round, and differs between
 *                 glibc's allocator and memcheck's): definitely lost 1,000 (24,000 B), still reachable 4
 *                 (160,000 B)
 *   thread_ended  a thread that allocates 5 blocks of 40 bytes, drops them, and ends (joined):
 *                 definitely lost 5 (200 B)
 *   thread_stale_stack  a thread that leaves the only pointers to a 56-byte block in frames 12 KiB down
 *                 its stack, returned from, and ends (joined; glibc keeps the stack for its next
 *                 thread, pointers and all): definitely lost 1 (56 B)
 *   thread_arena  a 40-byte block whose only pointer a thread copied into a 256-byte block of its
 *                 own and freed (the copy stays in the free chunk, in the heap glibc made for the
 *                 thread's arena, which then holds no live block): definitely lost 1 (40 B)
 *   thread_blocked  a thread that holds the only pointer to a 120-byte block on its stack and blocks
 *                 in read() on a pipe while main calls exit(): still reachable 1 (120 B), plus what
 *                 glibc keeps for a live thread (see tests/leak_shapes_memcheck_test.sh)
 *   interleaved   10 leaks, 7 small (16 to 64 bytes: 280 B) and 3 large (256, 300, 512 bytes),
 *                 between blocks of the same sizes that are freed: definitely lost 10 (1348 B)
 *   tree          a dropped binary tree of 7 nodes of 32 bytes: definitely lost 1 (32 B), indirectly
 *                 lost 6 (192 B)
 *   big_list      a list of 100,000 nodes of 24 bytes kept in a global, and one of 1,000 dropped, their
 *                 nodes interleaved (enough pooled blocks for the exit scan to split its walk over the
 *                 pools between two threads): still reachable 100,000 (2,400,000 B), definitely lost 1
 *                 and indirectly lost 999 (24 B and 23,976 B)
 *   self_pointer  a dropped 40-byte block whose first word points at itself: definitely lost 1 (40 B)
 *   pool_holds    two dropped 32-byte blocks, one holding the only pointer to a 1,000-byte block, the
 *                 other the only pointer 8 bytes into a 600-byte block: definitely lost 2 (64 B),
 *                 indirectly lost 2 (1,600 B). Pooled, the small ones sit in pools, which a detector
 *                 below reads as reachable: the large blocks are then still reachable and possibly lost
 *                 there
 *   data_global   a pointer to an 88-byte block in an initialised global (.data, where `global` uses a
 *                 zero one in .bss): still reachable 1 (88 B)
 *   relro         the only pointer to a 40-byte block in the program's RELRO (.data.rel.ro, made
 *                 writable for the store, then read-only again): memcheck reads no read-only mapping,
 *                 definitely lost 1 (40 B); LeakSanitizer reads every writable segment, RELRO included,
 *                 and reports nothing
 *   tls           a pointer to a 56-byte block in the main thread's static thread-local storage: still
 *                 reachable 1 (56 B)
 *   pthread_key   a 64-byte block set as the main thread's value of a pthread key: still reachable 1
 *                 (64 B)
 *   unaligned     the only copy of a 24-byte block's address stored 3 bytes into a global (detectors
 *                 read aligned words): definitely lost 1 (24 B)
 *   malloc0       two malloc(0) blocks, one dropped and one kept in a global: definitely lost 1 (0 B),
 *                 still reachable 1 (0 B)
 *   swapcontext   a 64 KiB block kept in a global, used as a context's stack; the context allocates a
 *                 48-byte block, keeps its only pointer in a local there and swaps back: still reachable
 *                 2 (65,584 B)
 *   thread_registers  a live thread whose only copy of an 88-byte block's address is in a register
 *                 (r12) while it spins, when main calls exit(): still reachable 1 (88 B), plus what
 *                 glibc keeps for a live thread
 *   dynamic_tls   a pointer to a 72-byte block in a thread-local variable of libleak_shapes_tls.so,
 *                 loaded with dlopen (its TLS block is glibc's allocation): still reachable 1 (72 B),
 *                 besides what dlopen keeps
 *   fork_child    the process forks; the child drops a 3-node list of 32-byte nodes and exits
 *                 (definitely lost 1, 32 B; indirectly lost 2, 64 B), the parent waits for it and
 *                 leaves nothing more than `none`
 *   exit_register the only copy of a 96-byte block's address is in rbx (a register each function
 *                 saves before it uses it) when main's callee calls exit(): still reachable 1 (96 B)
 *   none          nothing: what the C and C++ runtimes leave live at exit whatever the mode (stdout's
 *                 buffer, libstdc++'s emergency pool), which the other modes' figures include
 * No pointer to a block survives in a register or a stack slot at exit: blocks are made and dropped
 * in noinline functions, through volatile globals that are cleared, and main's frame holds none.
 * Prints one line; exits 0 (2 on a bad mode). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

static void* volatile sink;         /* overwritten and cleared: never a root at exit */
static void* volatile kept;         /* the still-reachable pointer of list and global */
static char* volatile kept_interior; /* interior: 16 bytes into its block */

struct node {
  struct node* next;
  char payload[24];
};

/* Wipes the stack below the caller's frame, where dead frames keep copies of pointers. */
__attribute__((noinline)) static void wipe_stack(void) {
  volatile char pad[16384];
  memset((char*)pad, 0, sizeof(pad));
}

/* Makes a list of n nodes and drops it. */
__attribute__((noinline)) static void drop_list(int n) {
  struct node* head = NULL;
  for (int i = 0; i < n; ++i) {
    struct node* node = malloc(sizeof(struct node));
    memset(node, 0, sizeof(*node));
    node->next = head;
    head = node;
  }
  sink = head;
  sink = NULL;
}

__attribute__((noinline)) static void make_list(void) {
  drop_list(10);
  kept = malloc(200);
  memset(kept, 0x20, 200);
}

__attribute__((noinline)) static void make_cycle(void) {
  void** b[4];
  for (int i = 0; i < 4; ++i) {
    b[i] = malloc(48);
    memset(b[i], 0, 48);
  }
  for (int i = 0; i < 4; ++i) b[i][0] = b[(i + 1) % 4];
  sink = b[0];
  for (int i = 0; i < 4; ++i) ((void* volatile*)b)[i] = NULL;
  sink = NULL;
}

__attribute__((noinline)) static void make_global(void) {
  kept = malloc(100);
  memset(kept, 0x31, 100);
}

__attribute__((noinline)) static void make_interior(void) {
  char* p = malloc(64);
  memset(p, 0x32, 64);
  kept_interior = p + 16;
}

static void* volatile* mapped_holder;
/* What the line printed at the end adds after "done". */
static const char* done_note = "";

/* An 80-byte block whose only pointer lies in `area`, a mapping of the program's own (its address kept
 * in a global so the mapping is not orphaned). */
static void hold_in_mapping(void** area) {
  void* p = malloc(80);
  memset(p, 0x33, 80);
  area[100] = p;
  mapped_holder = (void* volatile*)area;
}

__attribute__((noinline)) static void make_mmap(int shared) {
  void** area = mmap(NULL, 4096, PROT_READ | PROT_WRITE, (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS,
                     -1, 0);
  if (area == MAP_FAILED) exit(1);
  hold_in_mapping(area);
}

static void* volatile large_kept;

__attribute__((noinline)) static void make_merged_mmap(void) {
  const size_t large = 1 << 20;
  char* big = malloc(large);
  memset(big, 0x37, large);
  large_kept = big;
  /* Where glibc's mapping of the large block begins (its chunk header's 16 bytes before the block):
   * the page below it is free, as the kernel hands out addresses downwards. Under another allocator
   * the page may be taken, or the block not page-aligned, and the mapping then lands wherever the
   * kernel puts it (the same classes). */
  uintptr_t below = (((uintptr_t)big - 16) & ~(uintptr_t)4095) - 4096;
  void** area = mmap((void*)below, 4096, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (area == MAP_FAILED || (uintptr_t)area != below) {
    if (area != MAP_FAILED) munmap(area, 4096);
    area = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) exit(1);
  }
  hold_in_mapping(area);
}

static uintptr_t parse_hex(const char** s) {
  uintptr_t v = 0;
  for (;; ++*s) {
    const char c = **s;
    if (c >= '0' && c <= '9') {
      v = v * 16 + (uintptr_t)(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v = v * 16 + (uintptr_t)(c - 'a' + 10);
    } else {
      return v;
    }
  }
}

/* The mapping of /proc/self/maps that holds `addr`, read without allocating; 0 when none does. */
static int mapping_holding(uintptr_t addr, uintptr_t* start, uintptr_t* end) {
  static char text[1 << 16];
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return 0;
  size_t n = 0;
  for (ssize_t got; n < sizeof text - 1 && (got = read(fd, text + n, sizeof text - 1 - n)) > 0;) {
    n += (size_t)got;
  }
  close(fd);
  text[n] = '\0';
  for (const char* line = text; *line != '\0';) {
    const uintptr_t lo = parse_hex(&line);
    ++line;
    const uintptr_t hi = parse_hex(&line);
    if (lo <= addr && addr < hi) {
      *start = lo;
      *end = hi;
      return 1;
    }
    line = strchr(line, '\n');
    if (line == NULL) break;
    ++line;
  }
  return 0;
}

/* Maps tls_mmap's page right above, else right below, the mapping that holds the main thread's static
 * TLS and descriptor (glibc's thread pointer is the descriptor, which lies right above the TLS); null
 * when neither page is free. */
static void** map_next_to_tls(void) {
  uintptr_t start, end;
  if (!mapping_holding((uintptr_t)pthread_self(), &start, &end)) return NULL;
  const uintptr_t at[2] = {end, start - 4096};
  for (int i = 0; i < 2; ++i) {
    void** area = mmap((void*)at[i], 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (area == (void**)at[i]) return area;
    if (area != MAP_FAILED) munmap(area, 4096);
  }
  return NULL;
}

__attribute__((noinline)) static void make_tls_mmap(void) {
  void** area = map_next_to_tls();
  if (area != NULL) {
    done_note = " (its mapping next to the TLS)";
  } else {
    area = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) exit(1);
  }
  hold_in_mapping(area);
}

__attribute__((noinline)) static void make_guard_page(void) {
  char* b = malloc(5 * 4096);
  memset(b, 0, 5 * 4096);
  char* page = (char*)(((uintptr_t)b + 2 * 4096) & ~(uintptr_t)4095);
  void* before = malloc(64);
  memset(before, 0x38, 64);
  ((void**)b)[0] = before;
  void* after = malloc(48);
  memset(after, 0x39, 48);
  ((void**)(page + 4096))[3] = after;
  if (mprotect(page, 4096, PROT_NONE) != 0) exit(1);
  large_kept = b;
}

__attribute__((noinline)) static void make_arena_top(void) {
  sink = malloc(2664);
  memset(sink, 0x3b, 2664);
  sink = NULL;
}

static void* volatile kept_between[4];

static void* volatile big_head;

__attribute__((noinline)) static void make_big_list(void) {
  void** kept = NULL;
  void** dropped = NULL;
  for (int i = 0; i < 100000; ++i) {
    void** node = malloc(24);
    memset(node, 0x3d, 24);
    node[0] = kept;
    kept = node;
    if (i % 100 == 0) {
      node = malloc(24);
      memset(node, 0x3e, 24);
      node[0] = dropped;
      dropped = node;
    }
  }
  big_head = kept;
  dropped = NULL;
}

__attribute__((noinline)) static void make_many_lost(void) {
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 100 * (round + 1); ++i) {
      sink = malloc(24);
      memset(sink, 0x3c, 24);
    }
    kept_between[round] = malloc(40000);
    memset(kept_between[round], 0x3d, 40000);
  }
  sink = NULL;
}

/* Fills a frame of its own with copies of a fresh block's address, then returns: the copies stay in
 * the dead stack below main's frame. */
__attribute__((noinline)) static void make_dead_frame(void) {
  void* volatile copies[512];
  void* p = malloc(72);
  memset(p, 0x3a, 72);
  for (int i = 0; i < 512; ++i) copies[i] = p;
  __asm__ volatile("" : : "r"(copies) : "memory");
}

__attribute__((noinline)) static void* thread_leaks(void* arg) {
  (void)arg;
  for (int i = 0; i < 5; ++i) {
    sink = malloc(40);
    memset(sink, 0x34, 40);
  }
  sink = NULL;
  wipe_stack();
  return NULL;
}

/* The block's address handed to the thread (not as its argument: its descriptor keeps that). */
static void* volatile handoff;

__attribute__((noinline)) static void* thread_copies_and_frees(void* arg) {
  (void)arg;
  void** block = malloc(256);
  memset(block, 0, 256);
  block[8] = handoff;  /* past what a freed chunk's links overwrite */
  handoff = NULL;
  __asm__ volatile("" : : "r"(block) : "memory");
  free(block);
  wipe_stack();
  return NULL;
}

__attribute__((noinline)) static void make_thread_arena(void) {
  sink = malloc(40);
  memset(sink, 0x3f, 40);
  handoff = sink;
  sink = NULL;
  pthread_t t;
  if (pthread_create(&t, NULL, thread_copies_and_frees, NULL) != 0) exit(1);
  pthread_join(t, NULL);
}

/* Copies p into frames `depth` calls down, about 12 KiB below the caller, and returns. */
__attribute__((noinline)) static void keep_deep(int depth, void* p) {
  void* volatile frame[96];
  for (int i = 0; i < 96; ++i) frame[i] = depth == 0 ? p : NULL;
  if (depth > 0) keep_deep(depth - 1, p);
  __asm__ volatile("" : : "r"(frame) : "memory");
}

__attribute__((noinline)) static void* thread_stale_stack(void* arg) {
  (void)arg;
  void* p = malloc(56);
  memset(p, 0x36, 56);
  keep_deep(15, p);
  return NULL;
}

__attribute__((noinline)) static void make_thread_stale_stack(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, thread_stale_stack, NULL) != 0) exit(1);
  pthread_join(t, NULL);
}

__attribute__((noinline)) static void make_thread_ended(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, thread_leaks, NULL) != 0) exit(1);
  pthread_join(t, NULL);
}

static int ready_pipe[2];
static int block_pipe[2];

__attribute__((noinline)) static void* thread_blocks(void* arg) {
  (void)arg;
  void* volatile mine = malloc(120); /* its only copy: this stack slot */
  memset(mine, 0x35, 120);
  char c = 'r';
  if (write(ready_pipe[1], &c, 1) != 1) abort();
  while (read(block_pipe[0], &c, 1) < 0) {
  }
  return mine;
}

__attribute__((noinline)) static void make_thread_blocked(void) {
  pthread_t t;
  if (pipe(ready_pipe) != 0 || pipe(block_pipe) != 0) exit(1);
  if (pthread_create(&t, NULL, thread_blocks, NULL) != 0) exit(1);
  char c;
  if (read(ready_pipe[0], &c, 1) != 1) exit(1);
}

__attribute__((noinline)) static void make_interleaved(void) {
  static const size_t sizes[10] = {24, 256, 32, 48, 300, 64, 16, 40, 512, 56};
  for (int i = 0; i < 10; ++i) {
    void* before = malloc(sizes[i]);
    sink = malloc(sizes[i]);  /* the leak */
    memset(sink, 0x36, sizes[i]);
    void* after = malloc(sizes[(i + 3) % 10]);
    free(before);
    free(after);
  }
  sink = NULL;
}

__attribute__((noinline)) static void make_tree(void) {
  struct tnode {
    struct tnode* left;
    struct tnode* right;
    char payload[16];
  };
  struct tnode* nodes[7];
  for (int i = 0; i < 7; ++i) {
    nodes[i] = malloc(sizeof(struct tnode));
    memset(nodes[i], 0, sizeof(struct tnode));
  }
  for (int i = 0; i < 3; ++i) {
    nodes[i]->left = nodes[2 * i + 1];
    nodes[i]->right = nodes[2 * i + 2];
  }
  sink = nodes[0];
  for (int i = 0; i < 7; ++i) ((void* volatile*)nodes)[i] = NULL;
  sink = NULL;
}

__attribute__((noinline)) static void make_pool_holds(void) {
  void** a = malloc(32);
  void** c = malloc(32);
  memset(a, 0, 32);
  memset(c, 0, 32);
  char* b = malloc(1000);
  char* d = malloc(600);
  memset(b, 0x43, 1000);
  memset(d, 0x44, 600);
  a[1] = b;
  c[2] = d + 8;
  sink = a;
  sink = c;
  sink = NULL;
}

__attribute__((noinline)) static void make_self_pointer(void) {
  void** p = malloc(40);
  memset(p, 0, 40);
  p[0] = p;
  sink = p;
  sink = NULL;
}

static int data_anchor;
static void* volatile data_kept = &data_anchor; /* initialised: .data */

__attribute__((noinline)) static void make_data_global(void) {
  void* p = malloc(88);
  memset(p, 0x41, 88);
  data_kept = p;
}

/* Three pages of the program's initialised data, the middle one made inaccessible: a block kept
   in the first page is reachable, one kept in the middle page is lost to a scan that reads only
   what the program can read. */
static char guarded_data[3 * 4096] __attribute__((aligned(4096))) = {1};

__attribute__((noinline)) static void make_data_guard(void) {
  void* kept = malloc(72);
  memset(kept, 0x45, 72);
  void* hidden = malloc(80);
  memset(hidden, 0x46, 80);
  memcpy(guarded_data + 64, &kept, sizeof kept);
  memcpy(guarded_data + 4096 + 64, &hidden, sizeof hidden);
  if (mprotect(guarded_data + 4096, 4096, PROT_NONE) != 0) exit(1);
}

static int relro_anchor;
/* Initialised with an address and placed in .data.rel.ro: read-only once the loader relocated it. */
static void* relro_kept __attribute__((section(".data.rel.ro"), used)) = &relro_anchor;

static int find_relro(struct dl_phdr_info* info, size_t size, void* arg) {
  (void)size;
  if (info->dlpi_name[0] != '\0') return 0;  /* the program itself: listed first, with no name */
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != PT_GNU_RELRO) continue;
    uintptr_t* range = arg;
    range[0] = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
    range[1] = range[0] + info->dlpi_phdr[i].p_memsz;
  }
  return 1;
}

__attribute__((noinline)) static void make_relro(void) {
  uintptr_t range[2] = {0, 0};
  dl_iterate_phdr(find_relro, range);
  const uintptr_t at = (uintptr_t)&relro_kept, page = at & ~(uintptr_t)4095;
  /* The loader made the whole pages of [range[0], range[1]) read-only. */
  if (page < (range[0] & ~(uintptr_t)4095) || page + 4096 > (range[1] & ~(uintptr_t)4095)) {
    fprintf(stderr, "leak_shapes: relro: the variable is not on a RELRO page\n");
    exit(1);
  }
  void* p = malloc(40);
  memset(p, 0x44, 40);
  if (mprotect((void*)page, 4096, PROT_READ | PROT_WRITE) != 0) exit(1);
  *(void* volatile*)&relro_kept = p;
  if (mprotect((void*)page, 4096, PROT_READ) != 0) exit(1);
}

static __thread void* volatile tls_kept;

__attribute__((noinline)) static void make_tls(void) {
  void* p = malloc(56);
  memset(p, 0x42, 56);
  tls_kept = p;
}

__attribute__((noinline)) static void make_pthread_key(void) {
  pthread_key_t key;
  if (pthread_key_create(&key, NULL) != 0) exit(1);
  void* p = malloc(64);
  memset(p, 0x43, 64);
  if (pthread_setspecific(key, p) != 0) exit(1);
}

static char unaligned_holder[32];

__attribute__((noinline)) static void make_unaligned(void) {
  void* p = malloc(24);
  memset(p, 0x44, 24);
  memcpy(unaligned_holder + 3, &p, sizeof p);
}

__attribute__((noinline)) static void make_malloc0(void) {
  sink = malloc(0);
  sink = NULL;
  kept = malloc(0);
}

static ucontext_t main_context, side_context;

__attribute__((noinline)) static void on_side_stack(void) {
  void* volatile mine = malloc(48); /* its only copy: this frame, on the heap block used as a stack */
  memset(mine, 0x45, 48);
  swapcontext(&side_context, &main_context);
}

__attribute__((noinline)) static void make_swapcontext(void) {
  const size_t bytes = 64 * 1024;
  char* stack = malloc(bytes);
  memset(stack, 0, bytes);
  large_kept = stack;
  if (getcontext(&side_context) != 0) exit(1);
  side_context.uc_stack.ss_sp = stack;
  side_context.uc_stack.ss_size = bytes;
  side_context.uc_link = NULL;
  makecontext(&side_context, on_side_stack, 0);
  if (swapcontext(&main_context, &side_context) != 0) exit(1);
}

static const uintptr_t hide_key = 0x5a5a5a5a5a5a5a5aull;

/* A new block of `size` bytes filled with `fill`; its address xored with hide_key, so that no stack
 * slot or register of the caller holds it whole (this frame's copies die with it). */
__attribute__((noinline)) static uintptr_t hidden_block(size_t size, int fill) {
  char* volatile p = malloc(size);
  memset(p, fill, size);
  const uintptr_t hidden = (uintptr_t)p ^ hide_key;
  p = NULL;
  return hidden;
}

static volatile int registers_ready;

/* The block's address is made whole by the assembly alone, in r12; it says so and spins. */
__attribute__((noinline)) static void* thread_in_registers(void* arg) {
  (void)arg;
  volatile uintptr_t hidden = hidden_block(88, 0x46);
  const uintptr_t key = hide_key;
  wipe_stack();
  __asm__ volatile(
      "mov %0, %%r12\n\t"
      "xor %1, %%r12\n\t"
      "movl $1, %2\n\t"
      "1: pause\n\t"
      "jmp 1b\n\t"
      :
      : "r"((uintptr_t)hidden), "r"(key), "m"(registers_ready)
      : "r12", "memory");
  return NULL;
}

__attribute__((noinline)) static void make_thread_registers(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, thread_in_registers, NULL) != 0) exit(1);
  while (!registers_ready) {
  }
}

/* A pointer to a 72-byte block in a thread-local variable of an object loaded with dlopen, found
 * beside the executable. */
__attribute__((noinline)) static void make_dynamic_tls(void) {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
  if (n <= 0) exit(1);
  path[n] = '\0';
  char* slash = strrchr(path, '/');
  if (slash == NULL) exit(1);
  strcpy(slash + 1, "libleak_shapes_tls.so");
  void* handle = dlopen(path, RTLD_NOW);
  if (handle == NULL) exit(1);
  void (*keep)(void*) = (void (*)(void*))dlsym(handle, "leak_shapes_tls_keep");
  if (keep == NULL) exit(1);
  void* p = malloc(72);
  memset(p, 0x48, 72);
  keep(p);
}

/* The block's address made whole in rbx (which a called function saves and restores) right before
 * the call into exit(). */
__attribute__((noinline)) static void exit_with_register(void) {
  volatile uintptr_t hidden = hidden_block(96, 0x47);
  const uintptr_t key = hide_key;
  wipe_stack();
  printf("leak_shapes: exit_register done\n");
  fflush(stdout);
  __asm__ volatile(
      "mov %0, %%rbx\n\t"
      "xor %1, %%rbx\n\t"
      "xor %%edi, %%edi\n\t"
      "call exit@PLT\n\t"
      :
      : "r"((uintptr_t)hidden), "r"(key)
      : "rbx", "rdi", "memory");
}

__attribute__((noinline)) static void make_fork_child(void) {
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) exit(1);
  if (child == 0) {
    drop_list(3);
    wipe_stack();
    exit(0);
  }
  int status;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) exit(1);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: leak_shapes none|list|cycle|global|interior|mmap|shared_mmap|merged_mmap|tls_mmap|"
                    "guard_page|dead_frame|dead_frame_return|arena_top|many_lost|"
                    "thread_ended|thread_stale_stack|"
                    "thread_blocked|interleaved|tree|pool_holds|self_pointer|data_global|data_guard|relro|tls|pthread_key|unaligned|"
                    "malloc0|swapcontext|thread_registers|fork_child|exit_register|dynamic_tls\n");
    return 2;
  }
  const char* m = argv[1];
  if (strcmp(m, "none") == 0) {
  } else if (strcmp(m, "list") == 0) {
    make_list();
  } else if (strcmp(m, "cycle") == 0) {
    make_cycle();
  } else if (strcmp(m, "global") == 0) {
    make_global();
  } else if (strcmp(m, "interior") == 0) {
    make_interior();
  } else if (strcmp(m, "mmap") == 0) {
    make_mmap(0);
  } else if (strcmp(m, "shared_mmap") == 0) {
    make_mmap(1);
  } else if (strcmp(m, "merged_mmap") == 0) {
    make_merged_mmap();
  } else if (strcmp(m, "tls_mmap") == 0) {
    make_tls_mmap();
  } else if (strcmp(m, "guard_page") == 0) {
    make_guard_page();
  } else if (strcmp(m, "dead_frame") == 0) {
    make_dead_frame();
    printf("leak_shapes: %s done\n", m);
    fflush(stdout);
    exit(0);
  } else if (strcmp(m, "dead_frame_return") == 0) {
    make_dead_frame();
    printf("leak_shapes: %s done\n", m);
    fflush(stdout);
    return 0;
  } else if (strcmp(m, "arena_top") == 0) {
    printf("leak_shapes: %s done\n", m);
    fflush(stdout);
    make_arena_top();
    wipe_stack();
    exit(0);
  } else if (strcmp(m, "big_list") == 0) {
    make_big_list();
    wipe_stack();
  } else if (strcmp(m, "many_lost") == 0) {
    make_many_lost();
  } else if (strcmp(m, "thread_ended") == 0) {
    make_thread_ended();
  } else if (strcmp(m, "thread_stale_stack") == 0) {
    make_thread_stale_stack();
  } else if (strcmp(m, "thread_arena") == 0) {
    make_thread_arena();
    wipe_stack();
  } else if (strcmp(m, "thread_blocked") == 0) {
    make_thread_blocked();
  } else if (strcmp(m, "interleaved") == 0) {
    make_interleaved();
  } else if (strcmp(m, "tree") == 0) {
    make_tree();
  } else if (strcmp(m, "pool_holds") == 0) {
    make_pool_holds();
  } else if (strcmp(m, "self_pointer") == 0) {
    make_self_pointer();
  } else if (strcmp(m, "data_global") == 0) {
    make_data_global();
  } else if (strcmp(m, "relro") == 0) {
    make_relro();
  } else if (strcmp(m, "data_guard") == 0) {
    make_data_guard();
  } else if (strcmp(m, "tls") == 0) {
    make_tls();
  } else if (strcmp(m, "pthread_key") == 0) {
    make_pthread_key();
  } else if (strcmp(m, "unaligned") == 0) {
    make_unaligned();
  } else if (strcmp(m, "malloc0") == 0) {
    make_malloc0();
  } else if (strcmp(m, "swapcontext") == 0) {
    make_swapcontext();
  } else if (strcmp(m, "dynamic_tls") == 0) {
    make_dynamic_tls();
  } else if (strcmp(m, "thread_registers") == 0) {
    make_thread_registers();
  } else if (strcmp(m, "fork_child") == 0) {
    make_fork_child();
  } else if (strcmp(m, "exit_register") == 0) {
    exit_with_register();
  } else {
    fprintf(stderr, "leak_shapes: unknown mode '%s'\n", m);
    return 2;
  }
  wipe_stack();
  printf("leak_shapes: %s done%s\n", m, done_note);
  fflush(stdout);
  exit(0);
}

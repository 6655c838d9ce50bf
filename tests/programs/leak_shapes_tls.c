/* File: tests/programs/leak_shapes_tls.c
 *
 * A thread-local variable of an object loaded with dlopen (dynamic TLS: glibc allocates the block
 * that holds it when a thread first uses it), for leak_shapes' dynamic_tls mode. */
static __thread void* volatile held;

void leak_shapes_tls_keep(void* p) { held = p; }

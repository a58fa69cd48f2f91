/* fuseport backend layer: the process-wide set of live buffer and event
 * handles (the pointers fp_buffer_alloc and fp_event_create returned and that
 * were not freed since). Checking a pointer against this set is how the layer
 * tells a freed or foreign pointer from a live one without reading the memory
 * it points to: a freed handle's memory may be reused or unmapped, so its
 * fields (the magic word) prove nothing. Open addressing over the pointer
 * values, tombstones for removals, one mutex (contexts on several threads
 * share the set). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend_impl.h"

#define TOMBSTONE ((const void *)(uintptr_t)1)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const void **slots;
static size_t capacity; /* a power of two, or 0 */
static size_t occupied; /* live entries and tombstones */

static size_t slot_of(const void *p, size_t mask) {
  /* Fibonacci hashing of the address; allocations are 16-byte aligned */
  return (size_t)(((uint64_t)(uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 17) & mask;
}

/* The slot holding p, or SIZE_MAX. Called with the lock held. */
static size_t find(const void *p) {
  if (capacity == 0)
    return SIZE_MAX;
  const size_t mask = capacity - 1;
  for (size_t i = slot_of(p, mask), n = 0; n < capacity; i = (i + 1) & mask, ++n) {
    if (slots[i] == p)
      return i;
    if (slots[i] == NULL)
      return SIZE_MAX;
  }
  return SIZE_MAX;
}

/* Rebuilds the table with room for twice the live entries (at least 64),
 * dropping the tombstones. Called with the lock held. */
static bool grow(void) {
  size_t live = 0;
  for (size_t i = 0; i < capacity; ++i)
    live += slots[i] != NULL && slots[i] != TOMBSTONE;
  size_t cap = 64;
  while (cap < 4 * (live + 1))
    cap *= 2;
  const void **fresh = calloc(cap, sizeof *fresh);
  if (fresh == NULL)
    return false;
  for (size_t i = 0; i < capacity; ++i) {
    const void *p = slots[i];
    if (p == NULL || p == TOMBSTONE)
      continue;
    size_t j = slot_of(p, cap - 1);
    while (fresh[j] != NULL)
      j = (j + 1) & (cap - 1);
    fresh[j] = p;
  }
  free(slots);
  slots = fresh;
  capacity = cap;
  occupied = live;
  return true;
}

bool fp_live_add(const void *p) {
  pthread_mutex_lock(&lock);
  bool ok = true;
  if (2 * (occupied + 1) > capacity)
    ok = grow();
  if (ok) {
    size_t i = slot_of(p, capacity - 1);
    while (slots[i] != NULL && slots[i] != TOMBSTONE)
      i = (i + 1) & (capacity - 1);
    occupied += slots[i] == NULL;
    slots[i] = p;
  }
  pthread_mutex_unlock(&lock);
  return ok;
}

bool fp_live_remove(const void *p) {
  pthread_mutex_lock(&lock);
  const size_t i = p != NULL ? find(p) : SIZE_MAX;
  if (i != SIZE_MAX)
    slots[i] = TOMBSTONE;
  pthread_mutex_unlock(&lock);
  return i != SIZE_MAX;
}

bool fp_live_contains(const void *p) {
  if (p == NULL)
    return false;
  pthread_mutex_lock(&lock);
  const bool live = find(p) != SIZE_MAX;
  pthread_mutex_unlock(&lock);
  return live;
}

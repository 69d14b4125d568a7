/*
 * A slower disk for the benchmarks: an LD_PRELOAD library that makes every fsync,
 * fdatasync and syncfs of the processes that load it take at least
 * OPENMSMQ_BENCH_FLUSH_NS nanoseconds, one at a time machine-wide (all processes that
 * name the same OPENMSMQ_BENCH_FLUSH_LOCK file), like one device that completes one
 * cache flush at a time. The real call still runs first; only the time after it is
 * padded, with the lock held, so a device doing N flushes/s is modelled with
 * OPENMSMQ_BENCH_FLUSH_NS = 1e9 / N.
 *
 * Built and used by bench/_peer_setup.py (slow_disk_env); see docs/benchmarks.md.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_syncfs)(int);
static long long flush_ns;
static int lock_fd = -1;
static pthread_mutex_t in_process = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void after_fork_in_child(void) {
    /* The child shares the parent's open file description, and flock() locks belong
     * to it: the child opens its own so that parent and child exclude each other. */
    lock_fd = -1;
    pthread_mutex_init(&in_process, NULL);
}

static void init(void) {
    real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    real_syncfs = (int (*)(int))dlsym(RTLD_NEXT, "syncfs");
    const char *ns = getenv("OPENMSMQ_BENCH_FLUSH_NS");
    flush_ns = ns ? atoll(ns) : 0;
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

enum { FSYNC, FDATASYNC, SYNCFS };

static int padded(int which, int fd) {
    pthread_once(&once, init);
    int (*real)(int) = which == FSYNC ? real_fsync : which == FDATASYNC ? real_fdatasync : real_syncfs;
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (flush_ns <= 0)
        return real(fd);
    pthread_mutex_lock(&in_process);
    if (lock_fd < 0) {
        const char *path = getenv("OPENMSMQ_BENCH_FLUSH_LOCK");
        if (path)
            lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    }
    if (lock_fd >= 0)
        while (flock(lock_fd, LOCK_EX) < 0 && errno == EINTR) {
        }
    long long start = now_ns();
    int rc = real(fd);
    int saved = errno;
    long long left = flush_ns - (now_ns() - start);
    if (left > 0) {
        struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
        }
    }
    if (lock_fd >= 0)
        flock(lock_fd, LOCK_UN);
    pthread_mutex_unlock(&in_process);
    errno = saved;
    return rc;
}

int fsync(int fd) { return padded(FSYNC, fd); }

int fdatasync(int fd) { return padded(FDATASYNC, fd); }

int syncfs(int fd) { return padded(SYNCFS, fd); }

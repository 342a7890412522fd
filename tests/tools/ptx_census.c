/* rig-ptx-census: how much of a CUDA library's PTX softgpu runs (issue 14).
 * For each shared library named, it walks the fatbin containers of its
 * .nv_fatbin section, takes the PTX softgpu would pick from each (its fatbin
 * reader) and parses it with softgpu's engine in a child process of its own
 * (a crash or a hang then counts against that module alone). A module loads
 * when one of its kernels can run; a kernel is refused with the first
 * instruction softgpu does not run in it or in what it calls. It prints the
 * modules and kernels that load and run, the refusals grouped by reason
 * (instruction and why; line and kernel names dropped), and how many kernels
 * use instructions other work owns (tensor cores, cp.async/mbarrier).
 *   rig-ptx-census [-v] /usr/local/cuda/lib64/libcublas.so ...
 * (-v: one line per refused kernel or module). */
#include "softgpu/driver.h"

#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CONTAINER_MAGIC 0xBA55ED50u
#define LOG_LEN 1024
#define CHILD_SECONDS 300

typedef struct group { char key[200]; unsigned modules, kernels; char example[LOG_LEN]; } group;

static group groups[256];
static unsigned ngroups;
static int verbose;

/* Instruction families whose kernels another piece of work owns. */
static const char *const families[][8] = {
    { "tensor cores", "mma.", "wmma.", "ldmatrix.", "stmatrix.", "wgmma.", "movmatrix.", NULL },
    { "cp.async/mbarrier", "cp.async", "mbarrier.", "cp.reduce.async", NULL },
};
#define NFAM (sizeof families / sizeof *families)
static unsigned fam_kernels[NFAM], fam_loaded[NFAM];

/* Finds the .nv_fatbin section of an ELF64 file; 0 when there is none. */
static int find_fatbin(const uint8_t *f, size_t n, size_t *off, size_t *size)
{
    const Elf64_Ehdr *eh = (const void *)f;
    if (n < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64)
        return 0;
    if (eh->e_shoff > n || eh->e_shnum > (n - eh->e_shoff) / sizeof(Elf64_Shdr) || eh->e_shstrndx >= eh->e_shnum)
        return 0;
    const Elf64_Shdr *sh = (const void *)(f + eh->e_shoff);
    const Elf64_Shdr *str = &sh[eh->e_shstrndx];
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (str->sh_offset + sh[i].sh_name >= n || sh[i].sh_offset > n || sh[i].sh_size > n - sh[i].sh_offset)
            continue;
        if (strcmp((const char *)f + str->sh_offset + sh[i].sh_name, ".nv_fatbin") == 0) {
            *off = sh[i].sh_offset;
            *size = sh[i].sh_size;
            return 1;
        }
    }
    return 0;
}

/* Kernel names: each ".entry NAME(" of the text, in order. */
static unsigned count_entries(const char *ptx)
{
    unsigned n = 0;
    for (const char *s = ptx; (s = strstr(s, ".entry ")); s += 7)
        n++;
    return n;
}

/* Adds each kernel's use of the families (its body: up to the next entry
 * or function; functions it calls are not followed). */
static void scan_families(const char *ptx, int loaded)
{
    for (const char *s = strstr(ptx, ".entry "); s;) {
        const char *next = strstr(s + 7, ".entry ");
        const char *fn = strstr(s + 7, ".func ");
        const char *end = next && (!fn || next < fn) ? next : fn ? fn : s + strlen(s);
        for (unsigned f = 0; f < NFAM; f++) {
            int used = 0;
            for (unsigned k = 1; families[f][k] && !used; k++) {
                size_t kl = strlen(families[f][k]);
                for (const char *q = s; q + kl <= end && !used; q++)
                    used = (q[-1] == '\n' || q[-1] == '\t' || q[-1] == ' ' || q[-1] == '{') &&
                           memcmp(q, families[f][k], kl) == 0;
            }
            fam_kernels[f] += used;
            fam_loaded[f] += used && loaded;
        }
        s = next;
    }
}

/* The message without its line and kernel: "line N, in entry K: " goes,
 * an instruction keeps its opcode and the reason. */
static void group_key(const char *log, char *key, size_t keylen)
{
    const char *s = log;
    if (strncmp(s, "PTX for sm_", 11) == 0 && strstr(s, ": "))
        s = strstr(s, ": ") + 2;
    if (strncmp(s, "line ", 5) == 0 && strstr(s, ": "))
        s = strstr(s, ": ") + 2;
    const char *q = strchr(s, '\'');
    if (q) {
        const char *e = q + 1 + strcspn(q + 1, "'");
        size_t op = strcspn(q + 1, ".' ");
        snprintf(key, keylen, "%.*s'%.*s'%s", (int)(q - s), s, (int)op, q + 1, *e ? e + 1 : "");
    } else {
        snprintf(key, keylen, "%s", s);
    }
    /* Numbers in a reason (register names, sizes) would split groups. */
    char *w = key;
    for (const char *r = key; *r; r++) {
        int digit = *r >= '0' && *r <= '9';
        if (!digit)
            *w++ = *r;
        else if (w == key || w[-1] != '#')
            *w++ = '#';
    }
    *w = 0;
}

static void add_failure(const char *log, unsigned modules, unsigned kernels)
{
    char key[200];
    group_key(log, key, sizeof key);
    unsigned i = 0;
    while (i < ngroups && strcmp(groups[i].key, key))
        i++;
    if (i == ngroups) {
        if (ngroups == sizeof groups / sizeof *groups)
            i--;
        else {
            ngroups++;
            snprintf(groups[i].key, sizeof groups[i].key, "%s", key);
            snprintf(groups[i].example, sizeof groups[i].example, "%s", log);
        }
    }
    groups[i].modules += modules;
    groups[i].kernels += kernels;
}

/* Parses one module in a child: its answer is one line per kernel, the
 * refusal's reason or empty ("K\t<why>"), or one line for a module that
 * does not load ("M\t<why>"). Returns the answer (malloc'd), NULL when the
 * child crashed or hung (why in log). */
static char *parse_in_child(const char *ptx, size_t len, char *log)
{
    int fd[2];
    if (pipe(fd))
        return NULL;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        alarm(CHILD_SECONDS);
        FILE *out = fdopen(fd[1], "w");
        soft_program *prog;
        char msg[LOG_LEN] = "";
        if (soft_program_parse(ptx, len, &prog, msg, sizeof msg) != CUDA_SUCCESS) {
            fprintf(out, "M\t%s\n", msg[0] ? msg : "(no reason)");
        } else {
            for (uint32_t i = 0; i < soft_program_entry_count(prog); i++) {
                const char *why = soft_program_entry(prog, i)->refusal;
                fprintf(out, "K\t%.*s\n", LOG_LEN - 1, why ? why : "");
            }
        }
        fclose(out);
        _exit(0);
    }
    close(fd[1]);
    if (pid < 0) {
        close(fd[0]);
        return NULL;
    }
    size_t got = 0, cap = 4096;
    char *buf = malloc(cap);
    ssize_t k;
    while (buf && (k = read(fd[0], buf + got, cap - got - 1)) > 0) {
        got += (size_t)k;
        if (cap - got < 2)
            buf = realloc(buf, cap *= 2);
    }
    close(fd[0]);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || !buf) {
        snprintf(log, LOG_LEN, "the parse crashed or hung (%s)",
                 WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "?");
        free(buf);
        return NULL;
    }
    buf[got] = 0;
    return buf;
}

static void census(const char *path, unsigned *mod_ok, unsigned *mod_all, unsigned *k_ok, unsigned *k_all)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        fprintf(stderr, "rig-ptx-census: cannot open %s\n", path);
        exit(2);
    }
    const uint8_t *f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    size_t off, size;
    if (f == MAP_FAILED || !find_fatbin(f, (size_t)st.st_size, &off, &size)) {
        fprintf(stderr, "rig-ptx-census: %s has no .nv_fatbin section\n", path);
        exit(2);
    }
    unsigned containers = 0, sass_only = 0, empty = 0, ok = 0, all = 0, kok = 0, kall = 0;
    for (size_t o = off; o + 16 <= off + size;) {
        uint32_t magic;
        uint64_t psize;
        uint16_t hsize;
        memcpy(&magic, f + o, 4);
        memcpy(&hsize, f + o + 6, 2);
        memcpy(&psize, f + o + 8, 8);
        if (magic != CONTAINER_MAGIC) {
            o += 8;   /* containers start 8-aligned */
            continue;
        }
        containers++;
        char *ptx = NULL, msg[LOG_LEN];
        size_t len;
        if (soft_fatbin_ptx(f + o, hsize + psize, &ptx, &len, msg, sizeof msg) != CUDA_SUCCESS) {
            sass_only++;
        } else if (!strstr(ptx, ".entry") && !strstr(ptx, ".global") && !strstr(ptx, ".const")) {
            empty++;   /* SASS holding nothing a program reaches: loads empty */
            free(ptx);
        } else {
            unsigned kernels = count_entries(ptx), runnable = 0;
            char log[LOG_LEN];
            char *answer = parse_in_child(ptx, len, log);
            all++;
            kall += kernels;
            if (!answer || answer[0] == 'M') {
                const char *why = answer ? answer + 2 : log;
                if (answer)
                    answer[strcspn(answer, "\n")] = 0;
                add_failure(why, 1, kernels);
                if (verbose)
                    printf("%s container %u (%u kernels) does not load: %s\n", path, containers, kernels, why);
            } else {
                ok++;
                for (char *line = answer; *line; line += strcspn(line, "\n") + (line[strcspn(line, "\n")] != 0)) {
                    size_t ln = strcspn(line, "\n");
                    if (ln <= 2) {
                        runnable++;
                        continue;
                    }
                    char why[LOG_LEN];
                    snprintf(why, sizeof why, "%.*s", (int)(ln - 2), line + 2);
                    add_failure(why, 0, 1);
                    if (verbose)
                        printf("%s container %u: kernel refused: %s\n", path, containers, why);
                }
                kok += runnable;
            }
            free(answer);
            scan_families(ptx, runnable > 0);
            free(ptx);
        }
        o = (o + hsize + psize + 7) & ~(size_t)7;
    }
    printf("%s: %u containers, %u SASS only, %u empty; PTX modules load %u of %u, kernels run %u of %u\n",
           path, containers, sass_only, empty, ok, all, kok, kall);
    fflush(stdout);
    *mod_ok += ok;
    *mod_all += all;
    *k_ok += kok;
    *k_all += kall;
}

static int by_kernels(const void *a, const void *b)
{
    const group *x = a, *y = b;
    return (int)y->kernels - (int)x->kernels;
}

int main(int argc, char **argv)
{
    int i = 1;
    if (i < argc && strcmp(argv[i], "-v") == 0) {
        verbose = 1;
        i++;
    }
    if (i >= argc) {
        fprintf(stderr, "usage: rig-ptx-census [-v] LIBRARY.so...\n");
        return 2;
    }
    unsigned mok = 0, mall = 0, kok = 0, kall = 0;
    for (; i < argc; i++)
        census(argv[i], &mok, &mall, &kok, &kall);
    printf("total: PTX modules load %u of %u, kernels run %u of %u\n", mok, mall, kok, kall);
    qsort(groups, ngroups, sizeof *groups, by_kernels);
    printf("refusals by reason (modules not loading, kernels refused):\n");
    for (unsigned g = 0; g < ngroups; g++)
        printf("  %4u %5u  %s\n        e.g. %s\n", groups[g].modules, groups[g].kernels, groups[g].key,
               groups[g].example);
    for (unsigned fa = 0; fa < NFAM; fa++)
        printf("kernels using %s: %u (%u in modules that load)\n", families[fa][0], fam_kernels[fa],
               fam_loaded[fa]);
    return 0;
}

/* Sizing module images from their own headers. */
#include "shim/image.h"

#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FATBIN_WRAPPER_MAGIC 0x466243B1u
#define FATBIN_CONTAINER_MAGIC 0xBA55ED50u
#define IMAGE_MAX ((size_t)1 << 31)

static uint32_t load32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* A container: u32 magic, u16 version, u16 header size, u64 payload size. */
static int container_extent(const uint8_t *p, size_t *len)
{
    uint16_t header;
    uint64_t payload;
    memcpy(&header, p + 6, 2);
    memcpy(&payload, p + 8, 8);
    if (header < 16 || payload > IMAGE_MAX)
        return -1;
    *len = header + payload;
    return 0;
}

static int elf_extent(const uint8_t *p, size_t *len)
{
    Elf64_Ehdr eh;
    memcpy(&eh, p, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64)
        return -1;
    uint64_t end = sizeof eh;
    uint64_t sh = eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize;
    uint64_t ph = eh.e_phoff + (uint64_t)eh.e_phnum * eh.e_phentsize;
    if (sh > end)
        end = sh;
    if (ph > end)
        end = ph;
    /* Section contents may lie past the headers' table. */
    for (unsigned i = 0; i < eh.e_shnum && eh.e_shentsize >= sizeof(Elf64_Shdr); i++) {
        Elf64_Shdr s;
        memcpy(&s, p + eh.e_shoff + (uint64_t)i * eh.e_shentsize, sizeof s);
        if (s.sh_type != SHT_NOBITS && s.sh_offset + s.sh_size > end)
            end = s.sh_offset + s.sh_size;
    }
    if (end > IMAGE_MAX)
        return -1;
    *len = end;
    return 0;
}

int image_extent(const void *image, const void **data, size_t *len)
{
    if (!image)
        return -1;
    const uint8_t *p = image;
    uint32_t magic = load32(p);
    if (magic == FATBIN_WRAPPER_MAGIC) {
        const uint8_t *container;
        memcpy(&container, p + 8, sizeof container);
        if (!container || load32(container) != FATBIN_CONTAINER_MAGIC)
            return -1;
        *data = container;
        return container_extent(container, len);
    }
    *data = image;
    if (magic == FATBIN_CONTAINER_MAGIC)
        return container_extent(p, len);
    if (memcmp(p, ELFMAG, SELFMAG) == 0)
        return elf_extent(p, len);
    size_t n = strnlen(image, IMAGE_MAX);
    if (n == IMAGE_MAX)
        return -1;
    *len = n + 1;
    return 0;
}

int image_read_file(const char *path, uint8_t **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 1 << 16, n = 0, got;
    uint8_t *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n < cap)
            continue;
        if (cap >= IMAGE_MAX) {
            free(buf);
            fclose(f);
            errno = EFBIG;
            return -1;
        }
        uint8_t *grown = realloc(buf, (cap *= 2) + 1);
        if (!grown)
            free(buf);
        buf = grown;
    }
    fclose(f);
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* The bytes of a module image as the driver API receives it: a fatbin
 * wrapper, a fatbin container, an ELF cubin or PTX text, none of which
 * comes with its size. */
#ifndef RIG_SHIM_IMAGE_H
#define RIG_SHIM_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* Points *data at the self-contained bytes to send (the container behind a
 * wrapper) and sets *len. Returns 0, or -1 when the image is not one of the
 * four forms (or absurdly large). */
int image_extent(const void *image, const void **data, size_t *len);

/* Reads the file at path whole into *out (malloc'd, a NUL past *len, for
 * PTX text): 0, or -1 with errno (the open's, EFBIG past the largest image,
 * ENOMEM). cuModuleLoad and cuLinkAddFile read the program's files here:
 * the agent's machine has them no more than its memory. */
int image_read_file(const char *path, uint8_t **out, size_t *len);

#endif

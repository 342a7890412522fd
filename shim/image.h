/* The bytes of a module image as the driver API receives it: a fatbin
 * wrapper, a fatbin container, an ELF cubin or PTX text, none of which
 * comes with its size. */
#ifndef RIG_SHIM_IMAGE_H
#define RIG_SHIM_IMAGE_H

#include <stddef.h>

/* Points *data at the self-contained bytes to send (the container behind a
 * wrapper) and sets *len. Returns 0, or -1 when the image is not one of the
 * four forms (or absurdly large). */
int image_extent(const void *image, const void **data, size_t *len);

#endif

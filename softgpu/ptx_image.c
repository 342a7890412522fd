/* ptx_image: texture and surface instructions (tex, tld4, txq, suld,
 * sust, suq) on what the driver layer's objects describe (soft_image).
 * Sampling follows the texture descriptor: point and linear filtering
 * with exact float weights (a GPU uses 8-bit fixed-point weights, so
 * linear results differ in the last bits), wrap/clamp/mirror/border,
 * normalized coordinates, 8/16-bit integers read as normalized floats
 * unless read as integers. Level of detail is ignored: level 0 is sampled. */
#include "softgpu/ptx_exec.h"
#include "softgpu/ptx_math.h"

#include <math.h>
#include <string.h>

/* One element's channels as floats (normalized where the read mode says)
 * and as raw integers. */
typedef struct texel {
    float f[4];
    uint32_t i[4];
} texel;

static bool is_signed_fmt(uint32_t f)
{
    return f == CU_AD_FORMAT_SIGNED_INT8 || f == CU_AD_FORMAT_SIGNED_INT16 || f == CU_AD_FORMAT_SIGNED_INT32 ||
           (f >= CU_AD_FORMAT_SNORM_INT8X1 && f <= CU_AD_FORMAT_SNORM_INT16X4);
}

static bool is_norm_fmt(uint32_t f)
{
    return f >= CU_AD_FORMAT_UNORM_INT8X1 && f <= CU_AD_FORMAT_SNORM_INT16X4;
}

static bool is_float_fmt(uint32_t f)
{
    return f == CU_AD_FORMAT_FLOAT || f == CU_AD_FORMAT_HALF;
}

static void read_texel(const soft_image *im, uint32_t x, uint32_t y, uint32_t z, texel *t)
{
    const uint8_t *p = im->data + z * im->slice + y * im->pitch + (uint64_t)x * im->elem;
    unsigned cb = im->elem / im->channels;
    bool sign = is_signed_fmt(im->format);
    bool normalize = is_norm_fmt(im->format) || (cb < 4 && !is_float_fmt(im->format) && !im->read_as_integer);
    for (unsigned c = 0; c < 4; c++) {
        if (c >= im->channels) {
            t->i[c] = c == 3 ? 1 : 0;
            t->f[c] = c == 3 ? 1.0f : 0.0f;
            continue;
        }
        uint32_t raw = 0;
        memcpy(&raw, p + c * cb, cb);
        if (im->format == CU_AD_FORMAT_FLOAT) {
            memcpy(&t->f[c], &raw, 4);
            t->i[c] = raw;
            continue;
        }
        if (im->format == CU_AD_FORMAT_HALF) {
            t->f[c] = ptx_half_to_float((uint16_t)raw);
            t->i[c] = raw;
            continue;
        }
        int64_t v = raw;
        if (sign && cb < 4 && (raw >> (8 * cb - 1)) & 1)
            v = (int64_t)raw - ((int64_t)1 << (8 * cb));
        else if (sign && cb == 4)
            v = (int32_t)raw;
        t->i[c] = (uint32_t)v;
        if (normalize) {
            double max = (double)((1u << (8 * cb - (sign ? 1 : 0))) - 1);
            double f = (double)v / max;
            t->f[c] = (float)(f < -1.0 ? -1.0 : f);
        } else {
            t->f[c] = (float)v;
        }
    }
}

/* Applies an address mode to texel index i of an axis of n texels; false:
 * outside under border mode. Wrap and mirror need normalized coordinates
 * (otherwise they clamp, as on a GPU). */
static bool address(int64_t *i, uint32_t n, uint32_t mode, bool normalized)
{
    int64_t v = *i, nn = n;
    if (!normalized && (mode == CU_TR_ADDRESS_MODE_WRAP || mode == CU_TR_ADDRESS_MODE_MIRROR))
        mode = CU_TR_ADDRESS_MODE_CLAMP;
    switch (mode) {
    case CU_TR_ADDRESS_MODE_WRAP:
        v = ((v % nn) + nn) % nn;
        break;
    case CU_TR_ADDRESS_MODE_MIRROR: {
        int64_t m = ((v % (2 * nn)) + 2 * nn) % (2 * nn);
        v = m < nn ? m : 2 * nn - 1 - m;
        break;
    }
    case CU_TR_ADDRESS_MODE_BORDER:
        if (v < 0 || v >= nn)
            return false;
        break;
    default:
        v = v < 0 ? 0 : v >= nn ? nn - 1 : v;
        break;
    }
    *i = v;
    return true;
}

/* The texel at integer indices (ix, iy, iz) in slice-space, with address
 * modes applied per axis (dims of them), or the border colour. */
static void fetch(const soft_image *im, unsigned dims, const int64_t idx[3], uint32_t slice, texel *t)
{
    int64_t j[3] = { idx[0], dims > 1 ? idx[1] : 0, dims > 2 ? idx[2] : 0 };
    uint32_t n[3] = { im->width, im->height, im->depth };
    for (unsigned a = 0; a < dims; a++)
        if (!address(&j[a], n[a], im->address[a], im->normalized)) {
            for (unsigned c = 0; c < 4; c++) {
                t->f[c] = im->border[c];
                memcpy(&t->i[c], &im->border[c], 4);
            }
            return;
        }
    read_texel(im, (uint32_t)j[0], (uint32_t)j[1], (uint32_t)(dims > 2 ? j[2] : slice), t);
}

/* Samples at float coordinates u[0..dims) (normalized or not) in slice. */
static void sample(const soft_image *im, unsigned dims, const float u[3], uint32_t slice, bool linear, texel *out)
{
    uint32_t n[3] = { im->width, im->height, im->depth };
    double pos[3];
    for (unsigned a = 0; a < dims; a++)
        pos[a] = im->normalized ? (double)u[a] * n[a] : (double)u[a];
    if (!linear) {
        int64_t idx[3];
        for (unsigned a = 0; a < dims; a++)
            idx[a] = (int64_t)floor(pos[a]);
        fetch(im, dims, idx, slice, out);
        return;
    }
    int64_t base[3];
    double frac[3];
    for (unsigned a = 0; a < dims; a++) {
        double q = pos[a] - 0.5;
        base[a] = (int64_t)floor(q);
        frac[a] = q - floor(q);
    }
    double acc[4] = { 0, 0, 0, 0 };
    for (unsigned corner = 0; corner < (1u << dims); corner++) {
        int64_t idx[3];
        double wgt = 1;
        for (unsigned a = 0; a < dims; a++) {
            unsigned hi = (corner >> a) & 1;
            idx[a] = base[a] + hi;
            wgt *= hi ? frac[a] : 1 - frac[a];
        }
        texel t;
        fetch(im, dims, idx, slice, &t);
        for (unsigned c = 0; c < 4; c++)
            acc[c] += wgt * t.f[c];
    }
    for (unsigned c = 0; c < 4; c++) {
        out->f[c] = (float)acc[c];
        out->i[c] = (uint32_t)(int32_t)acc[c];
    }
}

/* A cube direction to its face and coordinates in [0, 1]. */
static void cube_face(float x, float y, float z, uint32_t *face, float *s, float *t)
{
    float ax = fabsf(x), ay = fabsf(y), az = fabsf(z), ma, sc, tc;
    if (ax >= ay && ax >= az) {
        *face = x >= 0 ? 0 : 1;
        ma = ax;
        sc = x >= 0 ? -z : z;
        tc = -y;
    } else if (ay >= az) {
        *face = y >= 0 ? 2 : 3;
        ma = ay;
        sc = x;
        tc = y >= 0 ? z : -z;
    } else {
        *face = z >= 0 ? 4 : 5;
        ma = az;
        sc = z >= 0 ? x : -x;
        tc = -y;
    }
    if (ma == 0)
        ma = 1;
    *s = (sc / ma + 1) / 2;
    *t = (tc / ma + 1) / 2;
}

static float as_f32(uint64_t v)
{
    float f;
    uint32_t b = (uint32_t)v;
    memcpy(&f, &b, 4);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static uint32_t clamp_layer(int64_t l, uint32_t n)
{
    return l < 0 ? 0 : l >= n ? n - 1 : (uint32_t)l;
}

/* tex and tld4 for one lane: c[] are the coordinate registers' values. */
static void tex_lane(const soft_image *im, const ptx_insn *in, const uint64_t c[4], texel *out)
{
    bool fcoord = in->type2 == T_F32;
    bool linear = im->filter == CU_TR_FILTER_MODE_LINEAR && in->type == T_F32;
    float u[3] = { 0, 0, 0 };
    unsigned dims;
    uint32_t slice = 0;
    const uint64_t *xyz = c;
    switch (in->mode) {
    case GEO_1D: dims = 1; break;
    case GEO_2D: dims = 2; break;
    case GEO_3D: dims = 3; break;
    case GEO_A1D: dims = 1; slice = clamp_layer((int32_t)c[0], im->depth); xyz = c + 1; break;
    case GEO_A2D: dims = 2; slice = clamp_layer((int32_t)c[0], im->depth); xyz = c + 1; break;
    default: {  /* cube, acube: a direction */
        uint32_t layer = in->mode == GEO_ACUBE ? (uint32_t)(int32_t)c[0] : 0;
        const uint64_t *d = in->mode == GEO_ACUBE ? c + 1 : c;
        uint32_t face;
        float s, t;
        cube_face(as_f32(d[0]), as_f32(d[1]), as_f32(d[2]), &face, &s, &t);
        soft_image face_im = *im;
        face_im.normalized = true;
        face_im.address[0] = face_im.address[1] = CU_TR_ADDRESS_MODE_CLAMP;
        u[0] = s;
        u[1] = t;
        sample(&face_im, 2, u, clamp_layer((int64_t)layer * 6 + face, im->depth), linear, out);
        return;
    }
    }
    if (!fcoord) {
        /* Integer coordinates: texel indices, no filtering, no scaling. */
        int64_t idx[3];
        for (unsigned a = 0; a < dims; a++)
            idx[a] = (int32_t)xyz[a];
        soft_image flat = *im;
        flat.normalized = false;
        if (im->linear) {
            /* tex1Dfetch: outside the memory reads zero. */
            flat.address[0] = CU_TR_ADDRESS_MODE_BORDER;
            memset(flat.border, 0, sizeof flat.border);
        }
        fetch(&flat, dims, idx, slice, out);
        return;
    }
    for (unsigned a = 0; a < dims; a++)
        u[a] = as_f32(xyz[a]);
    sample(im, dims, u, slice, linear, out);
}

/* tld4: the four texels of a bilinear footprint, one component each, in
 * the order (i0, j1), (i1, j1), (i1, j0), (i0, j0). */
static void gather_lane(const soft_image *im, const ptx_insn *in, const uint64_t c[4], texel *out)
{
    double pos[2];
    uint32_t n[2] = { im->width, im->height };
    for (unsigned a = 0; a < 2; a++)
        pos[a] = (im->normalized ? (double)as_f32(c[a]) * n[a] : (double)as_f32(c[a])) - 0.5;
    int64_t i0 = (int64_t)floor(pos[0]), j0 = (int64_t)floor(pos[1]);
    const int64_t at[4][2] = { { i0, j0 + 1 }, { i0 + 1, j0 + 1 }, { i0 + 1, j0 }, { i0, j0 } };
    for (unsigned k = 0; k < 4; k++) {
        texel t;
        int64_t idx[3] = { at[k][0], at[k][1], 0 };
        fetch(im, 2, idx, 0, &t);
        out->f[k] = t.f[in->space];
        out->i[k] = t.i[in->space];
    }
}

/* The byte at x (bytes), row y, slice z of a surface for an access of size
 * bytes; NULL when outside and not clamped (*zero: the access reads zero
 * or stores nothing). */
static uint8_t *surf_ptr(const soft_image *im, int64_t x, int64_t y, int64_t z, unsigned size, int clamp,
                         bool *zero)
{
    int64_t row = (int64_t)im->width * im->elem;
    bool out = x < 0 || x + size > row || y < 0 || y >= im->height || z < 0 || z >= im->depth;
    *zero = false;
    if (out) {
        if (clamp == SURF_ZERO) {
            *zero = true;
            return NULL;
        }
        if (clamp != SURF_CLAMP)
            return NULL;
        int64_t last = (row - (int64_t)size) / im->elem * im->elem;
        x = x < 0 ? 0 : x > last ? last : x;
        y = y < 0 ? 0 : y >= im->height ? im->height - 1 : y;
        z = z < 0 ? 0 : z >= im->depth ? im->depth - 1 : z;
        if (x + size > row)
            return NULL;
    }
    return im->data + z * im->slice + y * im->pitch + x;
}

/* Surface coordinates of a lane: x in bytes (in elements for sust.p), y, slice. */
static void surf_coords(const ptx_insn *in, const uint64_t c[4], int64_t *x, int64_t *y, int64_t *z)
{
    *y = *z = 0;
    switch (in->mode) {
    case GEO_1D: *x = (int32_t)c[0]; break;
    case GEO_2D: *x = (int32_t)c[0]; *y = (int32_t)c[1]; break;
    case GEO_3D: *x = (int32_t)c[0]; *y = (int32_t)c[1]; *z = (int32_t)c[2]; break;
    case GEO_A1D: *z = (int32_t)c[0]; *x = (int32_t)c[1]; break;
    default: *z = (int32_t)c[0]; *x = (int32_t)c[1]; *y = (int32_t)c[2]; break;
    }
}

/* sust.p: the 32-bit values of channel ch converted to the surface format. */
static void store_formatted(const soft_image *im, uint8_t *p, const uint64_t *vals, unsigned nvals)
{
    unsigned cb = im->elem / im->channels;
    bool sign = is_signed_fmt(im->format), norm = is_norm_fmt(im->format);
    for (unsigned c = 0; c < im->channels && c < nvals; c++) {
        uint32_t v = (uint32_t)vals[c];
        uint32_t raw;
        if (im->format == CU_AD_FORMAT_FLOAT) {
            raw = v;
        } else if (im->format == CU_AD_FORMAT_HALF) {
            raw = ptx_float_to_half(as_f32(v));
        } else if (norm) {
            float f = as_f32(v);
            double max = (double)((1u << (8 * cb - (sign ? 1 : 0))) - 1);
            double lo = sign ? -1.0 : 0.0;
            double q = f != f ? 0 : f < lo ? lo : f > 1 ? 1 : f;
            raw = (uint32_t)(int32_t)lrint(q * max);
        } else {
            raw = v;
        }
        memcpy(p + c * cb, &raw, cb);
    }
}

static const char *geo_name(int g)
{
    static const char *const names[] = { "1d", "2d", "3d", "a1d", "a2d", "cube", "acube" };
    return g >= 0 && g < 7 ? names[g] : "?";
}

bool ptx_image_exec(ptx_worker *k, ptx_warp *w, const ptx_insn *in, uint32_t m)
{
    ptx_run *run = k->run;
    uint64_t (*R)[PTX_WARP] = w->R;
    bool surface = in->op == OP_SULD || in->op == OP_SUST || in->op == OP_SUQ;
    const char *what = surface ? "surface" : "texture";
    uint64_t last = 0;
    const soft_image *im = NULL;
    if (in->flags & F_REF) {
        /* A reference: one binding for every lane, as the launch saw it. */
        const soft_launch *L = run->launch;
        im = in->a < L->nrefs ? &L->refs[in->a] : NULL;
        if (!im || !im->data) {
            ptx_run_fail(run, CUDA_ERROR_ILLEGAL_ADDRESS, "kernel %s: %s reference %s is not bound (PTX line %u)",
                         run->entry->name, what, run->prog->refs[in->a].name, in->line);
            return false;
        }
    }
    for (uint32_t r = m; r; r &= r - 1) {
        unsigned l = (unsigned)__builtin_ctz(r);
        uint64_t h = in->flags & F_REF ? 0 : R[in->a][l];
        if (!im || (h != last && !(in->flags & F_REF))) {
            im = run->launch->image ? run->launch->image(h, surface) : NULL;
            last = h;
            if (!im) {
                ptx_run_fail(run, CUDA_ERROR_ILLEGAL_ADDRESS,
                             "kernel %s: 0x%llx is not a live %s object (PTX line %u)", run->entry->name,
                             (unsigned long long)h, what, in->line);
                return false;
            }
        }
        const uint64_t c[4] = { R[in->b][l], R[in->c][l], R[in->e][l], R[in->d][l] };
        switch (in->op) {
        case OP_TEX:
        case OP_TLD4: {
            texel t;
            if (in->op == OP_TEX)
                tex_lane(im, in, c, &t);
            else
                gather_lane(im, in, c, &t);
            for (unsigned e = 0; e < 4; e++)
                R[in->v[e]][l] = in->type == T_F32 ? f32_bits(t.f[e]) : t.i[e];
            R[SR_SINK][l] = 0;
            break;
        }
        case OP_TXQ:
        case OP_SUQ: {
            uint32_t v;
            uint32_t layers = im->cubemap ? im->depth / 6 : im->depth;
            switch (in->mode) {
            case QUERY_WIDTH: v = im->width; break;
            case QUERY_HEIGHT: v = im->height; break;
            case QUERY_DEPTH: v = im->layered || im->cubemap ? 1 : im->depth; break;
            case QUERY_ARRAY_SIZE: v = im->layered ? layers : 1; break;
            case QUERY_NORMALIZED_COORDS: v = im->normalized; break;
            case QUERY_FILTER_MODE: v = im->filter; break;
            case QUERY_ADDR_MODE_0: case QUERY_ADDR_MODE_1: case QUERY_ADDR_MODE_2:
                v = im->address[in->mode - QUERY_ADDR_MODE_0];
                break;
            case QUERY_NUM_MIPMAP_LEVELS: v = im->levels; break;
            case QUERY_NUM_SAMPLES: v = 1; break;
            default:
                ptx_run_fail(run, CUDA_ERROR_NOT_SUPPORTED, "kernel %s: this %s query is not supported (PTX line %u)",
                             run->entry->name, what, in->line);
                return false;
            }
            R[in->d][l] = v;
            break;
        }
        case OP_SULD:
        case OP_SUST: {
            bool formatted = in->flags & F_FORMATTED;
            unsigned es = ptx_type_size(in->type), size = formatted ? im->elem : es * in->vec;
            int64_t x, y, z;
            surf_coords(in, c, &x, &y, &z);
            if (in->mode == GEO_1D || in->mode == GEO_A1D)
                y = 0;
            if (formatted)
                x *= im->elem;
            bool zero;
            uint8_t *p = surf_ptr(im, x, y, z, size, in->space, &zero);
            if (!p && !zero) {
                ptx_run_fail(run, CUDA_ERROR_ILLEGAL_ADDRESS,
                             "kernel %s: %s.%s of %u bytes at (%lld, %lld, %lld) outside the %ux%ux%u surface "
                             "(PTX line %u)", run->entry->name, in->op == OP_SULD ? "suld" : "sust",
                             geo_name(in->mode), size, (long long)x, (long long)y, (long long)z, im->width,
                             im->height, im->depth, in->line);
                return false;
            }
            if (in->op == OP_SULD) {
                for (unsigned e = 0; e < in->vec; e++) {
                    uint64_t v = 0;
                    if (p)
                        memcpy(&v, p + e * es, es);
                    R[in->v[e]][l] = in->dwidth < 8 ? v & ((1ull << (8 * in->dwidth)) - 1) : v;
                }
                R[SR_SINK][l] = 0;
            } else if (p && formatted) {
                uint64_t vals[4];
                for (unsigned e = 0; e < in->vec; e++)
                    vals[e] = R[in->v[e]][l];
                store_formatted(im, p, vals, in->vec);
            } else if (p) {
                for (unsigned e = 0; e < in->vec; e++) {
                    uint64_t v = R[in->v[e]][l];
                    memcpy(p + e * es, &v, es);
                }
            }
            break;
        }
        default:
            break;
        }
    }
    return true;
}

/* Stream attributes: the access policy window, synchronization policy,
 * priority and memory sync domains a stream carries. They are hints to a
 * GPU's caches and schedulers, which softgpu does not have: values are
 * checked as the driver checks them, kept, and read back. */
#include <string.h>

#include "softgpu/driver.h"

static CUresult check_value(CUstreamAttrID attr, const CUstreamAttrValue *v)
{
    switch ((int)attr) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
        const CUaccessPolicyWindow *w = &v->accessPolicyWindow;
        bool prop_ok = (unsigned)w->hitProp <= CU_ACCESS_PROPERTY_PERSISTING &&
                       (unsigned)w->missProp <= CU_ACCESS_PROPERTY_PERSISTING;
        return w->hitRatio >= 0.0f && w->hitRatio <= 1.0f && prop_ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        return v->syncPolicy >= CU_SYNC_POLICY_AUTO && v->syncPolicy <= CU_SYNC_POLICY_BLOCKING_SYNC
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
        return (unsigned)v->memSyncDomain <= CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE ? CUDA_SUCCESS
                                                                               : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult get_attribute(CUstream h, CUstreamAttrID attr, CUstreamAttrValue *out, bool ptds)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    CUstreamAttrValue v;
    memset(&v, 0, sizeof v);
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&s->lock);
    switch ((int)attr) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: v.accessPolicyWindow = s->access_policy; break;
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        v.syncPolicy = s->sync_policy ? s->sync_policy : CU_SYNC_POLICY_AUTO;
        break;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY: v.priority = s->priority; break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: v.memSyncDomainMap = s->domain_map; break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: v.memSyncDomain = s->domain; break;
    default: rc = CUDA_ERROR_INVALID_VALUE; break;
    }
    pthread_mutex_unlock(&s->lock);
    if (rc == CUDA_SUCCESS)
        *out = v;
    return rc;
}

static CUresult set_attribute(CUstream h, CUstreamAttrID attr, const CUstreamAttrValue *value, bool ptds)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    SOFT_TRY(check_value(attr, value));
    pthread_mutex_lock(&s->lock);
    switch ((int)attr) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: s->access_policy = value->accessPolicyWindow; break;
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY: s->sync_policy = value->syncPolicy; break;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        /* Clamped into cuCtxGetStreamPriorityRange's [-5, 0], as at creation. */
        s->priority = value->priority > 0 ? 0 : value->priority < -5 ? -5 : value->priority;
        break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: s->domain_map = value->memSyncDomainMap; break;
    default: s->domain = value->memSyncDomain; break;
    }
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}

static CUresult copy_attributes(CUstream dst, CUstream src, bool ptds)
{
    SOFT_TRY(soft_check_init());
    struct CUstream_st *d, *s;
    SOFT_TRY(soft_stream_get(dst, ptds, &d));
    SOFT_TRY(soft_stream_get(src, ptds, &s));
    if (d == s)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&s->lock);
    CUaccessPolicyWindow w = s->access_policy;
    CUsynchronizationPolicy p = s->sync_policy;
    CUlaunchMemSyncDomainMap m = s->domain_map;
    CUlaunchMemSyncDomain dom = s->domain;
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_lock(&d->lock);
    d->access_policy = w;
    d->sync_policy = p;
    d->domain_map = m;
    d->domain = dom;
    pthread_mutex_unlock(&d->lock);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuStreamGetAttribute(CUstream h, CUstreamAttrID attr, CUstreamAttrValue *value_out)
{
    return get_attribute(h, attr, value_out, false);
}

SOFT_API CUresult CUDAAPI cuStreamGetAttribute_ptsz(CUstream h, CUstreamAttrID attr, CUstreamAttrValue *value_out)
{
    return get_attribute(h, attr, value_out, true);
}

SOFT_API CUresult CUDAAPI cuStreamSetAttribute(CUstream h, CUstreamAttrID attr, const CUstreamAttrValue *value)
{
    return set_attribute(h, attr, value, false);
}

SOFT_API CUresult CUDAAPI cuStreamSetAttribute_ptsz(CUstream h, CUstreamAttrID attr, const CUstreamAttrValue *value)
{
    return set_attribute(h, attr, value, true);
}

SOFT_API CUresult CUDAAPI cuStreamCopyAttributes(CUstream dst, CUstream src)
{
    return copy_attributes(dst, src, false);
}

SOFT_API CUresult CUDAAPI cuStreamCopyAttributes_ptsz(CUstream dst, CUstream src)
{
    return copy_attributes(dst, src, true);
}

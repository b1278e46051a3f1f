"""Ops whose int64 tensors are indices. On Neuron they are 32-bit indices, which is exact for any
tensor with fewer than 2**31 elements (every tensor that fits in a NeuronCore's HBM), so these ops
run directly; only int64 *arithmetic* goes through the 32-bit policy of downcast.py."""

INDEX_OPS = frozenset({
    "aten::argmax", "aten::argmin", "aten::argsort", "aten::bincount", "aten::embedding",
    "aten::embedding_dense_backward", "aten::gather", "aten::index", "aten::index_add", "aten::index_add_",
    "aten::index_copy", "aten::index_copy_", "aten::index_fill", "aten::index_fill_", "aten::index_put",
    "aten::index_put_", "aten::_index_put_impl_", "aten::index_select", "aten::kthvalue", "aten::masked_select",
    "aten::max", "aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward",
    "aten::max_pool3d_with_indices", "aten::max_pool3d_with_indices_backward", "aten::max_unpool2d", "aten::min",
    "aten::mode", "aten::multi_margin_loss", "aten::nll_loss2d_backward", "aten::nll_loss2d_forward",
    "aten::nll_loss_backward", "aten::nll_loss_forward", "aten::nonzero", "aten::one_hot", "aten::put_",
    "aten::scatter", "aten::scatter_", "aten::scatter_add", "aten::scatter_add_", "aten::scatter_reduce",
    "aten::scatter_reduce_", "aten::searchsorted", "aten::sort", "aten::take", "aten::topk", "aten::unique_dim",
    "aten::_unique2", "aten::_embedding_bag", "aten::_embedding_bag_backward", "aten::gather_backward",
    # int64 here is the RNG seed/offset bookkeeping of fused attention, not data
    "aten::_scaled_dot_product_fused_attention_overrideable",
    "aten::_scaled_dot_product_fused_attention_overrideable_backward",
})

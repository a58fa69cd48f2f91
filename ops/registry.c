/* fuseport: the operator registry -- the one table every tool iterates. */
#include <stdio.h>
#include <string.h>

#include "ops_internal.h"

static const fp_op *const registry[] = {
    &fp_op_pointwise_chain,   &fp_op_bias_gelu,
    &fp_op_bias_dropout_add,  &fp_op_softmax,
    &fp_op_double_softmax,    &fp_op_softmax_backward,
    &fp_op_layernorm,         &fp_op_norm_chain,
    &fp_op_hreduce_pointwise, &fp_op_hreduce_reduce,
    &fp_op_matmul_add,        &fp_op_matmul_relu,
    &fp_op_matmul_add_relu,   &fp_op_matmul_matmul,
    &fp_op_matmul_split_act,  &fp_op_linear_geglu,
    &fp_op_quant_pack,        &fp_op_dequant_unpack,
    &fp_op_relu_pack,         &fp_op_relu_unpack_backward,
    &fp_op_dw_from_packed,    &fp_op_conv_add,
    &fp_op_conv_relu,         &fp_op_conv_bn,
    &fp_op_attention,
};

#define REGISTRY_SIZE ((int)(sizeof registry / sizeof registry[0]))

int fp_op_count(void) { return REGISTRY_SIZE; }

const fp_op *fp_op_at(int index) {
  return (index >= 0 && index < REGISTRY_SIZE) ? registry[index] : NULL;
}

const fp_op *fp_op_find(const char *name) {
  if (name == NULL)
    return NULL;
  for (int k = 0; k < REGISTRY_SIZE; ++k)
    if (strcmp(registry[k]->name, name) == 0)
      return registry[k];
  return NULL;
}

fp_status fp_op_lookup(const char *name, const fp_op **out) {
  if (name == NULL || out == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_op_lookup: NULL argument");
  *out = fp_op_find(name);
  if (*out != NULL)
    return FP_OK;
  char names[1024] = "";
  for (int k = 0; k < REGISTRY_SIZE; ++k) {
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s%s", k ? ", " : "", registry[k]->name);
  }
  return fp_error(FP_ERR_NOT_FOUND, "unknown op '%s' (known: %s)", name, names);
}

const fp_variant *fp_op_variant(const fp_op *op, const char *name) {
  if (op == NULL || name == NULL)
    return NULL;
  for (int k = 0; k < op->n_variants; ++k)
    if (strcmp(op->variants[k].name, name) == 0)
      return &op->variants[k];
  return NULL;
}

fp_status fp_op_variant_lookup(const fp_op *op, const char *name, const fp_variant **out) {
  if (op == NULL || name == NULL || out == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_op_variant_lookup: NULL argument");
  *out = fp_op_variant(op, name);
  if (*out != NULL)
    return FP_OK;
  char names[256] = "";
  for (int k = 0; k < op->n_variants; ++k) {
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s%s", k ? ", " : "", op->variants[k].name);
  }
  return fp_error(FP_ERR_NOT_FOUND, "op %s has no variant '%s' (its variants: %s)", op->name, name,
                  names);
}

int64_t fp_rows_param_m(const fp_problem *p) { return P_INT(p, P_M); }

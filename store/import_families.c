/*
 * import_families.c — the architecture families the importer reads, one
 * row each (import_internal.h), in --arch's and detection's order: a name
 * is matched, and an ambiguity reported, in this order.
 *
 * A new family is a file import_<family>.c defining its import_family, a
 * row here, its store_import_arch value (import.h), and its names in the
 * two messages below, which list the families as people read them.
 */
#include "store/import_internal.h"

const import_family *const import_families[] = {
    &import_family_gpt2,     &import_family_bert,   &import_family_llama,   &import_family_gemma2,
    &import_family_gpt_neox, &import_family_bloom,  &import_family_whisper, &import_family_qwen3,
    &import_family_olmo2,    &import_family_gemma3, &import_family_gpt_oss, &import_family_phi3,
    &import_family_llama4,
};

const size_t import_n_families = sizeof import_families / sizeof import_families[0];

_Static_assert(sizeof import_families / sizeof import_families[0] <= IMPORT_FAMILIES_MAX,
               "import.c scans at most IMPORT_FAMILIES_MAX families");

const char import_model_types_text[] =
    "llama, mistral, mixtral, qwen2, gemma2, gpt_neox, bloom, whisper, gpt2, bert, qwen3, "
    "qwen3_moe, olmo2, gemma3_text, gemma3, gpt_oss, phi3, llama4, llama4_text";

const char import_no_family_text[] =
    "no GPT-2 ('[transformer.]h.N.attn.c_attn.weight') nor BERT "
    "('[bert.]encoder.layer.N.attention.self.query.weight') nor Llama "
    "('[model.]layers.N.self_attn.q_proj.weight') nor Phi-3 "
    "('[model.]layers.N.self_attn.qkv_proj.weight') nor GPT-NeoX, BLOOM or Whisper "
    "attention tensors: not a checkpoint this tool reads";

/* What the model runs on: `se3screen --version` names the convolution's
 * instruction set (the widest this processor has, or the one SE3_ISA forces)
 * and OpenBLAS's kernels, which must not be weaker than the processor
 * supports unless the user asked for them with OPENBLAS_CORETYPE. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/cpu/isa.h"
#include "tests/testutil.h"

static enum nn_isa widest(void) {
  for (int i = NN_ISA_COUNT - 1; i > 0; i--)
    if (nn_isa_supported((enum nn_isa)i)) return (enum nn_isa)i;
  return NN_ISA_BASE;
}

/* The text after "prefix" up to the first of " ,(\n" in out (static buffer). */
static const char *field(const char *out, const char *prefix) {
  static char buf[64];
  const char *p = strstr(out, prefix);
  cr_assert(p, "no '%s' in:\n%s", prefix, out);
  p += strlen(prefix);
  size_t n = strcspn(p, " ,(\n");
  cr_assert_lt(n, sizeof buf);
  memcpy(buf, p, n);
  buf[n] = 0;
  return buf;
}

Test(platform, version_names_the_widest_kernels) {
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "env -u SE3_ISA %s --version", SE3_BINARY), 0, "%s", out);
  cr_assert(strstr(out, "se3screen "), "%s", out);
  cr_assert_str_eq(field(out, "model kernels: "), nn_isa_name(widest()), "%s", out);
  free(out);
}

Test(platform, se3_isa_forces_a_variant) {
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "SE3_ISA=base %s --version", SE3_BINARY), 0, "%s", out);
  cr_assert_str_eq(field(out, "model kernels: "), "base", "%s", out);
  free(out);
}

/* Without OPENBLAS_CORETYPE, OpenBLAS runs kernels as wide as the processor:
 * its own detection, or the core se3screen chose when that fell short. */
Test(platform, openblas_kernels_match_the_processor) {
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "env -u OPENBLAS_CORETYPE -u SE3_OPENBLAS_DETECTED %s --version", SE3_BINARY), 0, "%s", out);
  const char *core = field(out, "openblas: core ");
  static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
  static const char *const avx2[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"};
  int ok = 1;
  if (nn_isa_supported(NN_ISA_AVX512)) {
    ok = 0;
    for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
      ok |= !strcmp(core, avx512[i]);
  } else if (nn_isa_supported(NN_ISA_AVX2)) {
    ok = 0;
    for (size_t i = 0; i < sizeof avx2 / sizeof *avx2; i++)
      ok |= !strcmp(core, avx2[i]);
  }
  cr_assert(ok, "OpenBLAS runs %s kernels on a processor with %s:\n%s", core, nn_isa_name(widest()), out);
  free(out);
}

/* A core the user forces stands, and --version says what it costs. */
Test(platform, a_forced_openblas_core_stands_and_is_reported) {
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "env -u SE3_OPENBLAS_DETECTED OPENBLAS_CORETYPE=Prescott %s --version", SE3_BINARY), 0, "%s",
               out);
  cr_assert_str_eq(field(out, "openblas: core "), "Prescott", "%s", out);
  cr_assert(strstr(out, "OPENBLAS_CORETYPE=Prescott is set"), "%s", out);
  if (nn_isa_supported(NN_ISA_AVX2)) cr_assert(strstr(out, "this processor could run"), "%s", out);
  free(out);
}

/* OpenMP's idle threads: se3screen caps libgomp's spinning (a second process
 * on the same cores otherwise spends its time slices waiting on spinners:
 * bench/contention.sh), and a setting of the user's stands. */
Test(platform, openmp_waiting_is_capped_unless_the_user_chose) {
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY %s --version", SE3_BINARY), 0, "%s", out);
  cr_assert(strstr(out, "waiting: GOMP_SPINCOUNT=" NN_OMP_SPINCOUNT "\n"), "%s", out);
  free(out);
  cr_assert_eq(tu_sh(&out, "env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=77 %s --version", SE3_BINARY), 0, "%s", out);
  cr_assert(strstr(out, "waiting: GOMP_SPINCOUNT=77\n"), "%s", out);
  free(out);
  cr_assert_eq(tu_sh(&out, "env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive %s --version", SE3_BINARY), 0, "%s", out);
  cr_assert(strstr(out, "waiting: OMP_WAIT_POLICY=passive\n"), "%s", out);
  free(out);
}

/* The CUDA backend's decisions that need no GPU, on the CPU:
 * - which GPU a process takes (models/cuda/table.h's nn_cuda_pick, and
 *   models/device.h's parse of `device:` into by rank or by index): the
 *   node-local rank modulo the GPUs a process sees, so under Slurm's
 *   --gpus-per-task=1 every rank takes its one GPU, cuda:0; an explicit
 *   cuda:N stays N.
 * dev/cuda_emu (`check devices`) opens the emulated GPUs themselves. */
#include <criterion/criterion.h>
#include <string.h>

#include "models/cuda/table.h"
#include "models/device.h"

/* ---- the GPU a process takes ---- */

Test(cuda_pick, by_rank_is_the_local_rank_modulo_the_gpus_seen) {
  /* one GPU seen (--gpus-per-task=1, CUDA_VISIBLE_DEVICES per rank): always cuda:0 */
  for (int rank = 0; rank < 8; rank++)
    cr_expect_eq(nn_cuda_pick(rank, 1, 1), 0, "local rank %d, 1 GPU seen: cuda:%d", rank, nn_cuda_pick(rank, 1, 1));
  /* the node's GPUs all seen: rank r takes GPU r */
  for (int rank = 0; rank < 4; rank++)
    cr_expect_eq(nn_cuda_pick(rank, 1, 4), rank);
  /* two GPUs seen by each of four ranks: around again */
  cr_expect_eq(nn_cuda_pick(2, 1, 2), 0);
  cr_expect_eq(nn_cuda_pick(3, 1, 2), 1);
}

Test(cuda_pick, an_explicit_index_stays_itself) {
  /* cuda:1 with one GPU stays 1 (the backend refuses it, naming what it found) */
  cr_expect_eq(nn_cuda_pick(1, 0, 1), 1);
  cr_expect_eq(nn_cuda_pick(5, 0, 8), 5);
  cr_expect_eq(nn_cuda_pick(0, 0, 2), 0);
  /* no GPU seen: left for the backend's "no GPU" message */
  cr_expect_eq(nn_cuda_pick(3, 1, 0), 3);
}

Test(cuda_pick, device_words_say_by_rank_or_by_index) {
  struct nn_device d;
  char err[256];
  cr_assert_eq(nn_device_parse("cuda", &d, err, sizeof err), 0);
  cr_expect(d.cuda && d.by_rank && d.index == 0 && !d.any, "cuda: by rank, local rank 0 until the caller sets it");
  cr_assert_eq(nn_device_parse("auto", &d, err, sizeof err), 0);
  cr_expect(d.cuda && d.by_rank && d.any, "auto: by rank, the CPU when no GPU can be used");
  cr_assert_eq(nn_device_parse("cuda:1", &d, err, sizeof err), 0);
  cr_expect(d.cuda && !d.by_rank && d.index == 1, "cuda:1: GPU 1 exactly");
  cr_assert_eq(nn_device_parse("cuda:0", &d, err, sizeof err), 0);
  cr_expect(d.cuda && !d.by_rank && d.index == 0);
  cr_assert_eq(nn_device_parse("cpu", &d, err, sizeof err), 0);
  cr_expect(!d.cuda && !d.by_rank);
}

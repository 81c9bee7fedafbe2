//! The matrix product on AMX tiles: weights and inputs rounded to bfloat16, as in
//! [`super::gemm_bf16`], multiplied by `tdpbf16ps`, which takes a tile of 16 token rows by 32
//! inputs and a tile of 32 inputs by 16 outputs and adds their 8,192 products to a tile of
//! 16 × 16 f32 sums. A register-only loop of it ran at 986 G multiply-adds/s on one core of the
//! CI machine on 2026-11-28, against 186 G for `vfmadd231ph` (the fastest AVX-512 product,
//! [`super::gemm_fp16`]).
//!
//! Rust has no stable AMX intrinsics, so the tile instructions are written as inline assembly.
//! Linux hands a process the tiles' 8 KB of register state only when asked
//! (`arch_prctl(ARCH_REQ_XCOMP_PERM)`), so [`available`] asks once and reports whether it may.
//!
//! The eight tile registers hold, for each block of 32 token rows and 32 outputs, four sums
//! (`tmm0`–`tmm3`), two input tiles (`tmm4`, `tmm5`) and two weight tiles (`tmm6`, `tmm7`), all
//! of 16 rows by 64 bytes. The compiler never uses tile registers, so they keep their values
//! from one `asm!` block to the next. The sums start from a tile of the bias and are stored
//! straight into the output where they fit in it; the next weight tiles are prefetched while
//! the current ones multiply (about 6% on long turns). On long turns the forward embeds about
//! 1.8 times the tokens per second of the AVX512-FP16 product (docs/BENCHMARKS.md).

use half::bf16;

#[cfg(target_arch = "x86_64")]
use std::arch::asm;
use std::sync::OnceLock;

/// Token rows of one tile.
const ROWS: usize = 16;
/// Outputs of one tile.
const COLUMNS: usize = 16;
/// Inputs of one tile: 16 pairs, 64 bytes of bfloat16 per row.
const DEPTH: usize = 32;

/// One weight tile as `tileloadd` reads it, 64 bytes a row: 16 rows of input pairs, each row
/// the 16 outputs' two weights side by side.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct WeightTile([bf16; DEPTH * COLUMNS]);

/// One row's 32 inputs of one input tile, in bfloat16: a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct InputLine([bf16; DEPTH]);

/// One tile of sums as `tilestored` writes it.
#[repr(C, align(64))]
struct SumTile([f32; ROWS * COLUMNS]);

impl Default for SumTile {
    fn default() -> Self {
        Self([0.0; ROWS * COLUMNS])
    }
}

/// The tile configuration `ldtilecfg` reads: palette 1, eight tiles of 16 rows by 64 bytes.
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

impl TileConfig {
    fn eight_full_tiles() -> Self {
        let mut config = [0u8; 64];
        config[0] = 1;
        for tile in 0..8 {
            // Bytes per row (little-endian u16 at 16 + 2·tile), then rows (u8 at 48 + tile).
            config[16 + 2 * tile] = 64;
            config[48 + tile] = ROWS as u8;
        }
        Self(config)
    }
}

/// A layer's weights as the product reads them: `column_blocks` blocks of [`COLUMNS`]
/// outputs, each of `depth_blocks` tiles of [`DEPTH`] inputs; and each block's bias repeated
/// on 16 rows, the tile its sums start from.
pub(super) struct PackedTiles {
    tiles: Vec<WeightTile>,
    biases: Vec<SumTile>,
    depth_blocks: usize,
    column_blocks: usize,
}

/// The inputs of one product in bfloat16, [`ROWS`]-row tiles side by side: row `r`'s inputs
/// `32·b..32·b + 32` are line `r · depth_blocks + b`. Rows and inputs past the matrix are zero.
#[derive(Default)]
pub(super) struct Rounded {
    lines: Vec<InputLine>,
    /// Where a tile of sums that reaches past the output is stored.
    partial: SumTile,
}

/// Whether this CPU runs the product and Linux lets this process use the tiles: AMX-TILE and
/// AMX-BF16, AVX-512F and AVX512_BF16 (to round the inputs), and the tiles' state granted.
/// Asked once per process.
pub(super) fn available() -> bool {
    static GRANTED: OnceLock<bool> = OnceLock::new();
    *GRANTED.get_or_init(|| {
        let granted = cpu_has_tiles() && super::gemm_bf16::available() && request_tile_state();
        tracing::debug!(granted, "AMX tiles");
        granted
    })
}

/// Whether CPUID reports AMX-TILE and AMX-BF16 (leaf 7, EDX bits 24 and 22). std's feature
/// detection has no stable name for them yet.
fn cpu_has_tiles() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: CPUID exists on every x86_64 CPU; leaf 7 reads zeros where it is not
        // implemented.
        let leaf = std::arch::x86_64::__cpuid_count(7, 0);
        let tile = leaf.edx & (1 << 24) != 0;
        let bf16 = leaf.edx & (1 << 22) != 0;
        tile && bf16
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Asks Linux for the tiles' register state (`ARCH_REQ_XCOMP_PERM` for `XFEATURE_XTILEDATA`);
/// false where it refuses or is not Linux.
fn request_tile_state() -> bool {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // SAFETY: arch_prctl with these arguments only changes which register state the
        // kernel saves for this process; it reads and writes no memory of ours.
        let status = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        if status != 0 {
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                "Linux refused the AMX tile state"
            );
        }
        status == 0
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        false
    }
}

/// `weight` (`out_dim` rows of `in_dim`) in bfloat16 and `bias` (`out_dim`), packed for
/// [`linear`]. Outputs and inputs past the matrix are padded with zeros.
pub(super) fn pack(weight: &[f32], bias: &[f32], in_dim: usize, out_dim: usize) -> PackedTiles {
    let depth_blocks = in_dim.div_ceil(DEPTH);
    let column_blocks = out_dim.div_ceil(COLUMNS);
    let mut tiles = vec![WeightTile([bf16::ZERO; DEPTH * COLUMNS]); column_blocks * depth_blocks];
    for (out, row) in weight.chunks_exact(in_dim).enumerate().take(out_dim) {
        let (block, column) = (out / COLUMNS, out % COLUMNS);
        for (k, &value) in row.iter().enumerate() {
            let tile = &mut tiles[block * depth_blocks + k / DEPTH];
            let pair = (k % DEPTH) / 2;
            tile.0[pair * COLUMNS * 2 + column * 2 + k % 2] = bf16::from_f32(value);
        }
    }
    let biases = (0..column_blocks)
        .map(|block| {
            let mut tile = SumTile::default();
            let first = block * COLUMNS;
            let bias = &bias[first.min(bias.len())..bias.len().min(first + COLUMNS)];
            for row in tile.0.chunks_exact_mut(COLUMNS) {
                row[..bias.len()].copy_from_slice(bias);
            }
            tile
        })
        .collect();
    PackedTiles {
        tiles,
        biases,
        depth_blocks,
        column_blocks,
    }
}

/// `output[r][o] = bias[o] + Σₖ input[r][k]·W[o][k]` for every row `r`, with `W` and `bias`
/// as [`pack`] laid them out and each input rounded to bfloat16 into `rounded`.
///
/// # Panics
/// If the lengths disagree (a bug in the caller, not an input) or the product is not
/// [`available`].
pub(super) fn linear(
    input: &[f32],
    packed: &PackedTiles,
    in_dim: usize,
    out_dim: usize,
    output: &mut [f32],
    rounded: &mut Rounded,
) {
    let depth_blocks = in_dim.div_ceil(DEPTH);
    assert!(in_dim > 0 && packed.depth_blocks == depth_blocks);
    assert!(packed.column_blocks == out_dim.div_ceil(COLUMNS));
    assert!(packed.tiles.len() == packed.column_blocks * depth_blocks);
    assert!(packed.biases.len() == packed.column_blocks);
    assert!(input.len().is_multiple_of(in_dim));
    assert!(output.len() == input.len() / in_dim * out_dim);
    assert!(
        available(),
        "the AMX product needs AMX-TILE, AMX-BF16 and AVX512_BF16"
    );
    #[cfg(target_arch = "x86_64")]
    {
        let n_rows = input.len() / in_dim;
        let row_tiles = n_rows.div_ceil(ROWS);
        rounded.lines.clear();
        rounded.lines.resize(
            row_tiles * ROWS * depth_blocks,
            InputLine([bf16::ZERO; DEPTH]),
        );
        for (row, lines) in input
            .chunks_exact(in_dim)
            .zip(rounded.lines.chunks_exact_mut(depth_blocks))
        {
            for (part, line) in row.chunks(DEPTH).zip(lines) {
                // SAFETY: the CPU has AVX-512F and AVX512_BF16 (`available`, asserted above).
                unsafe { super::gemm_bf16::round_avx512(part, &mut line.0[..part.len()]) };
            }
        }
        let mut product = Product {
            lines: &rounded.lines,
            partial: &mut rounded.partial,
            packed,
            n_rows,
            out_dim,
            output,
        };
        // SAFETY: the tiles are granted (`available`, asserted above); `lines` holds
        // `row_tiles` tiles of rows and `packed` the layer's tiles, as asserted above.
        unsafe { product.run(row_tiles) };
    }
}

/// The operands of one product, with the lengths [`linear`] asserted.
struct Product<'a> {
    lines: &'a [InputLine],
    /// Where a tile of sums that reaches past the output is stored.
    partial: &'a mut SumTile,
    packed: &'a PackedTiles,
    n_rows: usize,
    out_dim: usize,
    output: &'a mut [f32],
}

#[cfg(target_arch = "x86_64")]
impl Product<'_> {
    /// Every block of up to two row tiles by two column blocks, the tile configuration loaded
    /// before and released after.
    ///
    /// # Safety
    /// The tiles are granted; `lines` holds `row_tiles` · [`ROWS`] rows; the other lengths are
    /// those [`linear`] asserts.
    unsafe fn run(&mut self, row_tiles: usize) {
        let config = TileConfig::eight_full_tiles();
        // SAFETY: the configuration is 64 bytes, palette 1, with valid tile shapes.
        unsafe { asm!("ldtilecfg [{}]", in(reg) config.0.as_ptr(), options(nostack, readonly)) };
        let column_blocks = self.packed.column_blocks;
        let mut row_tile = 0;
        while row_tile < row_tiles {
            let two_rows = row_tile + 1 < row_tiles;
            let mut block = 0;
            while block < column_blocks {
                let two_columns = block + 1 < column_blocks;
                // SAFETY: `row_tile` (and the next, when `two_rows`) is below `row_tiles`,
                // `block` (and the next, when `two_columns`) below `column_blocks`.
                unsafe {
                    match (two_rows, two_columns) {
                        (true, true) => self.block::<2, 2>(row_tile, block),
                        (true, false) => self.block::<2, 1>(row_tile, block),
                        (false, true) => self.block::<1, 2>(row_tile, block),
                        (false, false) => self.block::<1, 1>(row_tile, block),
                    }
                }
                block += 2;
            }
            row_tile += 2;
        }
        // SAFETY: gives the tile state back; the tiles are not read after this.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    }

    /// The sums of `R` row tiles from `row_tile` by `C` column blocks from `block`, over every
    /// input, then written out with the bias.
    ///
    /// # Safety
    /// As [`Self::run`], after `ldtilecfg`; `row_tile + R` row tiles and `block + C` column
    /// blocks exist.
    #[inline(always)]
    unsafe fn block<const R: usize, const C: usize>(&mut self, row_tile: usize, block: usize) {
        let depth_blocks = self.packed.depth_blocks;
        // Bytes from one token row's inputs to the next.
        let input_stride = depth_blocks * std::mem::size_of::<InputLine>();
        let weight_stride = COLUMNS * 2 * std::mem::size_of::<bf16>();
        let inputs =
            self.lines[row_tile * ROWS * depth_blocks..][..R * ROWS * depth_blocks].as_ptr();
        let weights = self.packed.tiles[block * depth_blocks..][..C * depth_blocks].as_ptr();
        let biases = self.packed.biases[block..][..C].as_ptr();
        let sum_stride = COLUMNS * std::mem::size_of::<f32>();
        // The sums start from the bias: tile `c` of `biases` for column block `block + c`.
        // SAFETY: the tiles are configured (the caller's condition); `biases` holds `C` tiles
        // of 16 rows of 64 bytes (bounds-checked when taken above).
        unsafe {
            asm!(
                "tileloadd tmm0, [{first} + {stride} * 1]",
                "tileloadd tmm2, [{first} + {stride} * 1]",
                first = in(reg) biases,
                stride = in(reg) sum_stride,
                options(nostack, readonly)
            );
            if C == 2 {
                asm!(
                    "tileloadd tmm1, [{second} + {stride} * 1]",
                    "tileloadd tmm3, [{second} + {stride} * 1]",
                    second = in(reg) biases.add(1),
                    stride = in(reg) sum_stride,
                    options(nostack, readonly)
                );
            }
        }
        for depth in 0..depth_blocks {
            // SAFETY: row tile `r < R` starts `r · ROWS · depth_blocks` lines after `inputs`,
            // and its 16 rows, `input_stride` bytes apart, hold 64 bytes at line `depth`; weight
            // tile `depth` of column block `c < C` is `c · depth_blocks + depth` tiles after
            // `weights`. Both slices were bounds-checked when taken above.
            unsafe {
                // The next weight tiles, into L1 while these multiply.
                if depth + 1 < depth_blocks {
                    prefetch(weights.add(depth + 1));
                    if C == 2 {
                        prefetch(weights.add(depth_blocks + depth + 1));
                    }
                }
                let first_rows = inputs.add(depth);
                asm!(
                    "tileloadd tmm4, [{a} + {stride} * 1]",
                    "tileloadd tmm6, [{b} + {weight_stride} * 1]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    a = in(reg) first_rows,
                    b = in(reg) weights.add(depth),
                    stride = in(reg) input_stride,
                    weight_stride = in(reg) weight_stride,
                    options(nostack, readonly)
                );
                if C == 2 {
                    asm!(
                        "tileloadd tmm7, [{b} + {stride} * 1]",
                        "tdpbf16ps tmm1, tmm4, tmm7",
                        b = in(reg) weights.add(depth_blocks + depth),
                        stride = in(reg) weight_stride,
                        options(nostack, readonly)
                    );
                }
                if R == 2 {
                    asm!(
                        "tileloadd tmm5, [{a} + {stride} * 1]",
                        "tdpbf16ps tmm2, tmm5, tmm6",
                        a = in(reg) first_rows.add(ROWS * depth_blocks),
                        stride = in(reg) input_stride,
                        options(nostack, readonly)
                    );
                    if C == 2 {
                        asm!("tdpbf16ps tmm3, tmm5, tmm7", options(nostack, nomem));
                    }
                }
            }
        }
        for r in 0..R {
            for c in 0..C {
                let first_row = (row_tile + r) * ROWS;
                let first_column = (block + c) * COLUMNS;
                let rows = ROWS.min(self.n_rows.saturating_sub(first_row));
                let columns = COLUMNS.min(self.out_dim - first_column);
                let whole = rows == ROWS && columns == COLUMNS;
                let (at, stride) = if whole {
                    let at = &mut self.output[first_row * self.out_dim + first_column..]
                        [..(ROWS - 1) * self.out_dim + COLUMNS];
                    (at.as_mut_ptr(), self.out_dim * std::mem::size_of::<f32>())
                } else {
                    (self.partial.0.as_mut_ptr(), sum_stride)
                };
                // SAFETY: `at` holds 16 rows of 64 bytes, `stride` apart: the output's rows
                // from `first_row` at column `first_column` (the slice bounds-checked above)
                // when the tile lies inside the output, else `partial`.
                unsafe {
                    match (r, c) {
                        (0, 0) => {
                            asm!("tilestored [{at} + {stride} * 1], tmm0", at = in(reg) at, stride = in(reg) stride, options(nostack))
                        }
                        (0, _) => {
                            asm!("tilestored [{at} + {stride} * 1], tmm1", at = in(reg) at, stride = in(reg) stride, options(nostack))
                        }
                        (_, 0) => {
                            asm!("tilestored [{at} + {stride} * 1], tmm2", at = in(reg) at, stride = in(reg) stride, options(nostack))
                        }
                        _ => {
                            asm!("tilestored [{at} + {stride} * 1], tmm3", at = in(reg) at, stride = in(reg) stride, options(nostack))
                        }
                    }
                }
                if !whole {
                    let sums = &self.partial.0;
                    for row in 0..rows {
                        self.output[(first_row + row) * self.out_dim + first_column..][..columns]
                            .copy_from_slice(&sums[row * COLUMNS..][..columns]);
                    }
                }
            }
        }
    }
}

/// Asks for `tile`'s sixteen cache lines to be brought into L1.
///
/// # Safety
/// None beyond a valid address: a prefetch never faults.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn prefetch(tile: *const WeightTile) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    for line in 0..ROWS {
        // SAFETY: `line · 64` bytes stay inside the 1 KB tile.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(tile.cast::<i8>().add(line * 64)) };
    }
}

#[cfg(test)]
mod tests {
    use super::super::gemm_bf16::assert_products_of_rounded_values;
    use super::{available, linear, pack, Rounded};

    #[test]
    fn the_tile_product_matches_a_plain_product_of_rounded_values() {
        if !available() {
            eprintln!("skipped: this CPU or kernel has no AMX tiles, so the path is never taken");
            return;
        }
        let mut rounded = Rounded::default();
        // Odd input sizes, ragged blocks of rows and columns (one or two of each, partly
        // filled), and the model's own shapes.
        let shapes = [
            (1, 8, 5),
            (3, 17, 48),
            (9, 40, 100),
            (13, 384, 1152),
            (40, 384, 1152),
            (7, 1536, 384),
            (33, 1536, 384),
            (17, 33, 97),
        ];
        assert_products_of_rounded_values(&shapes, |input, weight, bias, in_dim, out_dim| {
            let packed = pack(weight, bias, in_dim, out_dim);
            let mut output = vec![f32::NAN; input.len() / in_dim * out_dim];
            linear(input, &packed, in_dim, out_dim, &mut output, &mut rounded);
            output
        });
    }
}

#!/usr/bin/env bash
# Proves the arm64 NEON kernels (cpu/isa/neon.c) on any Linux machine: cross-compiles the C
# sources that do not include Python.h, cpu/isa/scalar.c, cpu/isa/neon.c and the driver
# tools/neon_check.c into a static arm64 program and runs it under qemu-aarch64 (GEMM against
# the scalar micro-kernels, the vector math against double libm, the optimizer loops bit for
# bit; see neon_check.c).  On an x86-64 host with AVX2 + FMA the same driver is also built
# natively and run for avx2, and the two vector-math digests must agree: NEON's exp / log /
# tanh / sigmoid / gelu give the same bits as AVX2's.  On an arm64 host the program runs natively.
#
# Needs: aarch64-linux-gnu-gcc (Debian/Ubuntu: gcc-aarch64-linux-gnu libc6-dev-arm64-cross) and
# qemu-aarch64 (qemu-user), or a native arm64 gcc.  Env: CC_ARM64, QEMU_ARM64 override the
# tools; NEON_CHECK_KEEP=dir keeps the build there; NEON_CHECK_X86=0 skips the AVX2 comparison;
# NEON_CHECK_DUMP=file makes the driver write its vector-math inputs and outputs there.  Exits
# non-zero on any failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

HOST="$(uname -m)"
if [ "$HOST" = aarch64 ] || [ "$HOST" = arm64 ]; then
    CC_ARM64="${CC_ARM64:-${CC:-cc}}"
    RUN_ARM64=()
else
    CC_ARM64="${CC_ARM64:-aarch64-linux-gnu-gcc}"
    RUN_ARM64=("${QEMU_ARM64:-qemu-aarch64}")
fi
for tool in "$CC_ARM64" "${RUN_ARM64[@]}"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "check_neon: $tool not found (apt-get install gcc-aarch64-linux-gnu" \
             "libc6-dev-arm64-cross qemu-user)" >&2
        exit 2
    fi
done

if [ -n "${NEON_CHECK_KEEP:-}" ]; then
    BUILD="$NEON_CHECK_KEEP"
    mkdir -p "$BUILD"
else
    BUILD="$(mktemp -d)"
    trap 'rm -rf "$BUILD"' EXIT
fi

# setup.py's BASE_FLAGS (-std=c11 also keeps a * b + c unfused, which the optimizer loops'
# bitwise agreement relies on); -Werror for the files this check is about
BASE=(-std=c11 -O3 -fno-math-errno -pthread -Wall -Wno-unused-function -Icpu)
STRICT=(-Werror)
# the portable files: everything in cpu/ that does not need Python
mapfile -t PORTABLE < <(grep -L 'Python\.h' cpu/*.c)

# Flags of one file beyond BASE: setup.py's per-ISA flags, and -Werror where this check is about
file_flags() {
    case "$1" in
    cpu/isa/neon.c | cpu/dispatch.c | tools/neon_check.c) echo "${STRICT[*]}" ;;
    cpu/isa/sse2.c) echo "-msse2" ;;
    cpu/isa/avx2.c | cpu/isa/avx2_*.c) echo "-mavx2 -mfma" ;;
    cpu/isa/avx512.c | cpu/isa/avx512_*.c) echo "-mavx512f -mavx2 -mfma" ;;
    esac
}

# compile OUTDIR CC "FLAGS..." FILE... : one object per file, all in parallel; fails if any fails
compile() {
    local out="$1" cc="$2" flags="$3"
    shift 3
    mkdir -p "$out"
    local pids=() f
    for f in "$@"; do
        # shellcheck disable=SC2046,SC2086  # word lists
        "$cc" "${BASE[@]}" $flags $(file_flags "$f") -c "$f" -o "$out/$(echo "$f" | tr / _).o" &
        pids+=($!)
    done
    local rc=0 p
    for p in "${pids[@]}"; do
        wait "$p" || rc=1
    done
    return $rc
}

t0=$(date +%s)
echo "check_neon: building for arm64 with $CC_ARM64 (${#PORTABLE[@]} portable files, scalar, neon)"
compile "$BUILD/arm64" "$CC_ARM64" "-DGC_NEON_ISA=1" \
    "${PORTABLE[@]}" cpu/isa/scalar.c cpu/isa/neon.c tools/neon_check.c
"$CC_ARM64" -static -pthread -o "$BUILD/neon_check_arm64" "$BUILD"/arm64/*.o -lm

echo "check_neon: running ${RUN_ARM64[*]:+${RUN_ARM64[*]} }neon_check neon"
set +e
"${RUN_ARM64[@]}" "$BUILD/neon_check_arm64" neon | tee "$BUILD/neon.out"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
    echo "check_neon: FAILED: neon_check exited $rc" >&2
    exit 1
fi

# The same driver natively for AVX2: the vector math must be bitwise identical.  Only the files
# the driver links against (the arm64 build above compiled them all), the x86 ISA files with
# setup.py's ISA_FLAGS.  NEON_CHECK_X86=0 skips this step.
if [ "${NEON_CHECK_X86:-1}" != 0 ] && [ "$HOST" = x86_64 ] &&
    command -v "${CC:-cc}" >/dev/null 2>&1 && grep -qw avx2 /proc/cpuinfo &&
    grep -qw fma /proc/cpuinfo; then
    CC_X86="${CC:-cc}"
    echo "check_neon: building natively with $CC_X86 for the AVX2 comparison"
    compile "$BUILD/x86" "$CC_X86" "-DGC_X86_ISA=1" cpu/isa/avx512.c cpu/isa/avx2.c \
        cpu/isa/avx512_conv_backward.c cpu/isa/avx2_conv_backward.c \
        cpu/isa/sse2.c cpu/isa/scalar.c cpu/dispatch.c cpu/gemm.c cpu/pool.c cpu/unary.c \
        cpu/softmax.c cpu/optim.c cpu/qdynamic.c cpu/qconv.c cpu/qgemm.c tools/neon_check.c
    "$CC_X86" -pthread -o "$BUILD/neon_check_x86" "$BUILD"/x86/*.o -lm
    set +e
    "$BUILD/neon_check_x86" avx2 >"$BUILD/avx2.out" 2>&1
    rc=$?
    set -e
    if [ "$rc" -ne 0 ]; then
        cat "$BUILD/avx2.out"
        echo "check_neon: FAILED: the native avx2 run exited $rc" >&2
        exit 1
    fi
    dn="$(sed -n 's/^vmath digest: //p' "$BUILD/neon.out")"
    dx="$(sed -n 's/^vmath digest: //p' "$BUILD/avx2.out")"
    if [ -z "$dn" ] || [ "$dn" != "$dx" ]; then
        echo "check_neon: FAILED: vector math digests differ: neon $dn, avx2 $dx" >&2
        exit 1
    fi
    echo "check_neon: vector math bitwise identical to AVX2 (digest $dn)"
    echo "check_neon: native run: $(tail -n 1 "$BUILD/avx2.out")"
fi
echo "check_neon: OK ($(($(date +%s) - t0)) s)"

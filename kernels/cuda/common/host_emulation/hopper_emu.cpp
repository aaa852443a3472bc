// The out-of-line part of hopper_emu.h: the mbarrier table, TMA boxes, stmatrix, the wgmma groups'
// queues, named barriers, and the launch's tensor maps and scales. Compiled once into an object that
// every emulator links (tests/test_cuda_kernels.py: emulation_objects), not again in each kernel's
// build: with the standard-library code they instantiate, these were two thirds of the code a Hopper
// stage's emulation build generated. Nothing here reads a kernel's macros.
#include "hopper_emu.h"

namespace hopper {
namespace emu {
std::mutex& lock() {
  static std::mutex m;
  return m;
}

// What a block has of its own: its mbarriers (by shared address), its warps' stmatrix exchange, its threads' wgmma
// groups, its warpgroups' and named barriers. Kept per block's shared memory (the driver's: one buffer a block of the
// running cluster, the same buffer for blocks that run one after another, which then find the last one's as before)
struct BlockState {
  std::unordered_map<uint32_t, Bar> bars;
  uint32_t published[32][32] = {};
  Group open[gemm_host::kMaxThreads];
  std::deque<Group> committed[gemm_host::kMaxThreads];
  std::unique_ptr<gemm_host::Barrier> wg[8];
  std::map<std::pair<int, int>, std::unique_ptr<gemm_host::Barrier>> named;
};
static BlockState& block_state() {
  static std::map<unsigned char*, std::unique_ptr<BlockState>> states;
  auto& s = states[gemm_host::dynamic_smem];
  if (!s) s = std::make_unique<BlockState>();
  return *s;
}

std::unordered_map<uint32_t, Bar>& bars() { return block_state().bars; }

Bar& bar_at(uint32_t addr) {
  auto it = bars().find(addr);
  if (it == bars().end()) gemm_host::fail("mbarrier used before mbarrier.init", smem(addr));
  return it->second;
}

void maybe_complete(Bar& b) {  // with lock() held
  if (b.pending == 0 && b.tx == 0) {
    b.phase += 1;
    b.pending = b.expected;
  }
}

double wait_limit_s() {
  const char* s = std::getenv("GEMMLAB_EMU_WAIT_S");
  return s ? std::atof(s) : 60.0;
}

uint32_t* published(unsigned lane) { return &block_state().published[tid() / 32][lane]; }

Group& open_group() { return block_state().open[tid()]; }  // per thread

std::deque<Group>& committed() { return block_state().committed[tid()]; }
void retire_groups(size_t pending) {
  while (committed().size() > pending) {
    for (auto& op : committed().front()) op();
    committed().pop_front();
  }
}
}  // namespace emu

// ---- mbarrier --------------------------------------------------------------------------------------
void mbar_init(uint64_t* bar, uint32_t arrivals) {
  std::lock_guard<std::mutex> g(emu::lock());
  emu::bars()[smem_u32(bar)] = emu::Bar{arrivals, arrivals, 0, 0};
}

void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  std::lock_guard<std::mutex> g(emu::lock());
  emu::Bar& b = emu::bar_at(smem_u32(bar));
  b.tx += bytes;
  b.pending -= 1;
  emu::maybe_complete(b);
}

void mbar_arrive(uint64_t* bar) {
  std::lock_guard<std::mutex> g(emu::lock());
  emu::Bar& b = emu::bar_at(smem_u32(bar));
  if (b.pending == 0) gemm_host::fail("mbarrier arrival beyond its expected count", bar);
  b.pending -= 1;
  emu::maybe_complete(b);
}

void mbar_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = smem_u32(bar);
  std::chrono::steady_clock::time_point since;
  for (unsigned polls = 0;; ++polls) {
    {
      // done when the phase of that parity has completed: the current phase has the other parity
      std::lock_guard<std::mutex> g(emu::lock());
      if ((emu::bar_at(addr).phase & 1u) != (parity & 1u)) return;
    }
    if (polls == 0)
      since = std::chrono::steady_clock::now();
    else if (polls % 1024 == 0 &&
             std::chrono::steady_clock::now() - since > std::chrono::duration<double>(emu::wait_limit_s()))
      break;
    gemm_host::wait_turn("an mbarrier (mbar_wait)", polls > 0);
  }
  {
    std::lock_guard<std::mutex> g(emu::lock());
    std::fprintf(stderr, "host emulation: block %u thread %u waited too long on the mbarrier at smem 0x%x for "
                 "parity %u; barriers (smem: phase, pending arrivals, pending bytes):\n", blockIdx.x, emu::tid(),
                 addr, parity);
    for (const auto& [a, b] : emu::bars())
      std::fprintf(stderr, "  0x%x: %u, %u, %lld\n", a, b.phase, b.pending, static_cast<long long>(b.tx));
    std::abort();
  }
}

template <bool kLoad>
inline void tma_box(unsigned char* tile, const TensorMap* map, int col, int row) {
  const auto* f = map->opaque;
  unsigned char* base = reinterpret_cast<unsigned char*>(f[0]);
  const long rows = f[1], cols = f[2], stride = f[3], box_rows = f[4], box_cols = f[5], eb = f[6], sw = f[7];
  const uint32_t tile_addr = smem_u32(tile);
  if (tile_addr % (sw == 128 ? 1024 : 128)) gemm_host::fail("TMA shared-memory box misaligned for its swizzle", tile);
  if (sw && box_cols * eb != sw) gemm_host::fail("emulated TMA swizzle needs rows of exactly the swizzle width", tile);
  for (long r = 0; r < box_rows; ++r)
    for (long c = 0; c < box_cols; ++c) {
      const uint32_t off = static_cast<uint32_t>(r * box_cols * eb + c * eb);
      unsigned char* s = emu::smem(sw == 128 ? emu::swizzle128(tile_addr + off) : tile_addr + off);
      const long gr = row + r, gc = col + c;
      const bool inside = gr >= 0 && gr < rows && gc >= 0 && gc < cols;
      if (kLoad) {
        if (inside) std::memcpy(s, base + gr * stride + gc * eb, eb);
        else std::memset(s, 0, eb);
      } else if (inside) {
        std::memcpy(base + gr * stride + gc * eb, s, eb);
      }
    }
}

void tma_load_2d(void* smem_dst, const TensorMap* map, uint64_t* bar, int col, int row) {
  tma_box<true>(static_cast<unsigned char*>(smem_dst), map, col, row);
  std::lock_guard<std::mutex> g(emu::lock());
  emu::Bar& b = emu::bar_at(smem_u32(bar));
  b.tx -= static_cast<int64_t>(map->opaque[4] * map->opaque[5] * map->opaque[6]);  // the whole box, OOB too
  emu::maybe_complete(b);
}

void bulk_load_1d(void* smem_dst, const void* src, uint32_t bytes, uint64_t* bar) {
  if ((reinterpret_cast<uintptr_t>(smem_dst) | reinterpret_cast<uintptr_t>(src) | bytes) % 16)
    gemm_host::fail("cp.async.bulk with an address or size that is not a multiple of 16 bytes", smem_dst);
  std::memcpy(smem_dst, src, bytes);
  std::lock_guard<std::mutex> g(emu::lock());
  emu::Bar& b = emu::bar_at(smem_u32(bar));
  b.tx -= static_cast<int64_t>(bytes);
  emu::maybe_complete(b);
}

void cp_async_16(void* smem_dst, const void* src) {
  if ((reinterpret_cast<uintptr_t>(smem_dst) | reinterpret_cast<uintptr_t>(src)) % 16)
    gemm_host::fail("cp.async with an address that is not 16-byte aligned", smem_dst);
  std::memcpy(smem_dst, src, 16);
}

// The same shared address in the cluster's block of rank `rank` (the mapa of the device), and back.
namespace {
struct AsBlock {
  unsigned char* saved;
  explicit AsBlock(uint32_t rank) : saved(gemm_host::dynamic_smem) { gemm_host::dynamic_smem = gemm_host::cluster_block_smem(rank); }
  ~AsBlock() { gemm_host::dynamic_smem = saved; }
};
}  // namespace

void mbar_arrive_cluster(uint64_t* bar, uint32_t cta_rank) {
  const uint32_t addr = smem_u32(bar);
  AsBlock as(cta_rank);
  mbar_arrive(reinterpret_cast<uint64_t*>(emu::smem(addr)));
}

void tma_load_2d_multicast(void* smem_dst, const TensorMap* map, uint64_t* bar, int col, int row, uint16_t mask) {
  const uint32_t dst = smem_u32(smem_dst), b = smem_u32(bar);
  if (mask >> gemm_host::cluster_size) gemm_host::fail("a TMA multicast mask with ranks past the cluster", smem_dst);
  for (uint32_t r = 0; r < gemm_host::cluster_size; ++r) {
    if (!((mask >> r) & 1u)) continue;
    AsBlock as(r);  // the box into rank r's shared memory, its bytes completed on rank r's barrier
    tma_load_2d(emu::smem(dst), map, reinterpret_cast<uint64_t*>(emu::smem(b)), col, row);
  }
}

void tma_store_2d(const TensorMap* map, const void* smem_src, int col, int row) {
  tma_box<false>(static_cast<unsigned char*>(const_cast<void*>(smem_src)), const_cast<TensorMap*>(map), col, row);
}

void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  if (addr % 16) gemm_host::fail("stmatrix row address not 16-byte aligned", emu::smem(addr));
  const unsigned l = emu::tid() % 32;
  *emu::published(l) = addr;
  __syncwarp();
  const uint32_t regs[4] = {r0, r1, r2, r3};
  for (int q = 0; q < 4; ++q) std::memcpy(emu::smem(*emu::published(8 * q + l / 4) + 4 * (l % 4)), &regs[q], 4);
  __syncwarp();
}

void wgmma_commit() {
  emu::committed().push_back(std::move(emu::open_group()));
  emu::open_group().clear();
}

void warpgroup_sync() {
  auto& wg = emu::block_state().wg[(emu::tid() / 128) % 8];
  if (!wg) wg = std::make_unique<gemm_host::Barrier>(128, "wgmma.wait_group (its warpgroup)");
  wg->arrive_and_wait();
}

// Named barriers by (id, thread count), the block's: bar.sync arrives and waits for its phase, bar.arrive only arrives.
static gemm_host::Barrier* named_barrier(int id, int threads) {
  auto& table = emu::block_state().named;
  std::lock_guard<std::mutex> g(emu::lock());
  auto& slot = table[{id, threads}];
  if (!slot) slot = std::make_unique<gemm_host::Barrier>(threads, "a named barrier (bar.sync)");
  return slot.get();
}
void named_barrier_sync(int id, int threads) { named_barrier(id, threads)->arrive_and_wait(); }
void named_barrier_arrive(int id, int threads) { named_barrier(id, threads)->arrive_only(); }
}  // namespace hopper

namespace gemm_host {
const hopper::TensorMap* emu_tensor_maps(const void* a, const void* b, void* c) {
  static std::vector<hopper::TensorMap> maps;
  static std::once_flag once;
  std::call_once(once, [&] {
    const char* env = std::getenv("GEMMLAB_EMU_MAPS");
    if (!env) fail("GEMMLAB_EMU_MAPS is not set (the tensor maps of a TMA kernel)", nullptr);
    std::string s(env);
    size_t pos = 0;
    while (pos < s.size()) {
      size_t end = s.find(';', pos);
      if (end == std::string::npos) end = s.size();
      const std::string one = s.substr(pos, end - pos);
      hopper::TensorMap m{};
      const char op = one[0];
      m.opaque[0] = reinterpret_cast<unsigned long long>(op == 'A' ? a : op == 'B' ? b : c);
      if (std::sscanf(one.c_str() + 2, "%llu,%llu,%llu,%llu,%llu,%llu,%llu", &m.opaque[1], &m.opaque[2],
                      &m.opaque[3], &m.opaque[4], &m.opaque[5], &m.opaque[6], &m.opaque[7]) != 7)
        fail("cannot parse GEMMLAB_EMU_MAPS", nullptr);
      maps.push_back(m);
      pos = end + 1;
    }
  });
  return maps.data();
}

const float* emu_scale_array(int i) {
  static std::vector<float> arrays[2];
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("GEMMLAB_EMU_SCALE_FILES");
    if (!env) fail("GEMMLAB_EMU_SCALE_FILES is not set (the scale arrays of a block-scaled launch)", nullptr);
    const std::string s(env);
    const size_t sep = s.find(';');
    if (sep == std::string::npos) fail("GEMMLAB_EMU_SCALE_FILES needs two paths: a;b", nullptr);
    const std::string paths[2] = {s.substr(0, sep), s.substr(sep + 1)};
    for (int j = 0; j < 2; ++j) {
      FILE* f = std::fopen(paths[j].c_str(), "rb");
      if (!f) fail("cannot open a scale file of GEMMLAB_EMU_SCALE_FILES", nullptr);
      std::fseek(f, 0, SEEK_END);
      const long bytes = std::ftell(f);
      std::fseek(f, 0, SEEK_SET);
      arrays[j].resize(static_cast<size_t>(bytes) / sizeof(float));
      if (std::fread(arrays[j].data(), sizeof(float), arrays[j].size(), f) != arrays[j].size())
        fail("cannot read a scale file of GEMMLAB_EMU_SCALE_FILES", nullptr);
      std::fclose(f);
    }
  });
  return arrays[i].data();
}

float emu_scale(int i) {
  const char* env = std::getenv("GEMMLAB_EMU_SCALES");
  float s[2] = {1.0f, 1.0f};
  if (env) std::sscanf(env, "%f,%f", &s[0], &s[1]);
  return s[i];
}
}  // namespace gemm_host

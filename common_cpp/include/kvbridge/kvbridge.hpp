// The whole public API of the kvbridge core.
#pragma once

#include "kvbridge/block_pool.hpp"
#include "kvbridge/buffer.hpp"
#include "kvbridge/errors.hpp"
#include "kvbridge/rmsnorm.hpp"
#include "kvbridge/stores.hpp"
#include "kvbridge/threads.hpp"
#include "kvbridge/tokens.hpp"

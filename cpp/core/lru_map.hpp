// A map that keeps its most recently used entries: find() makes an entry the most recently used,
// insert() drops the least recently used beyond the capacity. Not locked (its owner locks it).
// The handle's plan cache (core/plan_cache.hpp) and the Python bindings' known problems use it.
#pragma once
#include <cstddef>
#include <list>
#include <unordered_map>
#include <utility>

namespace convcore {

template <typename Key, typename Value, typename Hash>
class LruMap {
   public:
    explicit LruMap(size_t capacity) : capacity_(capacity) {}
    // The value for key, now the most recently used; null when absent.
    Value* find(const Key& key) {
        auto it = index_.find(key);
        if (it == index_.end()) return nullptr;
        if (it->second != order_.begin()) order_.splice(order_.begin(), order_, it->second);
        return &it->second->second;
    }
    // Keeps value for key unless one is there already (then returns that one); beyond the
    // capacity the least recently used go (capacity 0 keeps nothing). Returns the value for key.
    Value insert(const Key& key, Value value) {
        if (Value* kept = find(key)) return *kept;
        if (capacity_ == 0) return value;
        order_.emplace_front(key, value);
        index_.emplace(key, order_.begin());
        trim();
        return value;
    }
    void set_capacity(size_t capacity) {
        capacity_ = capacity;
        trim();
    }
    size_t capacity() const { return capacity_; }
    size_t size() const { return index_.size(); }
    void clear() {
        index_.clear();
        order_.clear();
    }
    // Every value, most recently used first.
    template <typename F>
    void for_each(F f) const {
        for (const auto& entry : order_) f(entry.second);
    }

   private:
    void trim() {
        while (index_.size() > capacity_) {
            index_.erase(order_.back().first);
            order_.pop_back();
        }
    }
    size_t capacity_;
    std::list<std::pair<Key, Value>> order_;  // most recently used first
    std::unordered_map<Key, typename std::list<std::pair<Key, Value>>::iterator, Hash> index_;
};

}  // namespace convcore

// Output helpers (see output.h).
#include "output.h"

#include <fmt/format.h>

#include <algorithm>

namespace epoch::ctl {

void PrintTable(std::ostream& out, const std::vector<std::string>& headers,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const std::string& h : headers) widths.push_back(h.size());
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string rule = "+";
  for (std::size_t w : widths) rule += std::string(w + 2, '-') + "+";
  auto line = [&](const std::vector<std::string>& cells, bool center) {
    std::string text = "|";
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      const std::size_t pad = widths[i] - cell.size();
      const std::size_t left = center ? pad / 2 : pad;  // etcdctl: rows right-aligned
      text += " " + std::string(left, ' ') + cell + std::string(pad - left, ' ') + " |";
    }
    out << text << "\n";
  };
  out << rule << "\n";
  line(headers, true);
  out << rule << "\n";
  for (const auto& row : rows) line(row, false);
  out << rule << "\n";
}

std::string LeaseHex(std::int64_t id) {
  return fmt::format("{:016x}", static_cast<std::uint64_t>(id));
}

std::string MemberHex(std::uint64_t id) { return fmt::format("{:x}", id); }

std::string HumanBytes(std::uint64_t bytes) {
  if (bytes < 10) return fmt::format("{} B", bytes);
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1000 && unit < 5) {
    value /= 1000;
    ++unit;
  }
  return value < 10 ? fmt::format("{:.1f} {}", value, units[unit])
                    : fmt::format("{:.0f} {}", value, units[unit]);
}

}  // namespace epoch::ctl

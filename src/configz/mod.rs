//! /configz: the merged configuration as served to operators (issue 2).

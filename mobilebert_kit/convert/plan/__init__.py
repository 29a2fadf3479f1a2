"""What one export will do: its options, task records, plan and input rows."""
